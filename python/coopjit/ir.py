"""Write kernels from the cooperative-matrix operations in Python, and run them on NumPy arrays.

A KernelBuilder builds one function of the kernel IR, the same IR the GEMM and reduction recipes
emit: it goes through the same verifier, printer, LLVM lowering and cache. Python numbers are
turned into constants of the type the operation needs (an integer type takes them exactly: a
number outside its range, or not a whole number, is a ValueError); regions (loop bodies,
per-element and combine functions) are Python callables that receive a builder positioned inside
the region.

    b = KernelBuilder("scale_rows")
    X = b.param("X", "ptr<f32>")
    m = b.load("coopmatrix<f32, 4, 16, acc, subgroup>", X, strides=(16, 1))
    m = b.per_element(m, lambda b, row, col, v: b.mul(v, b.convert(row, "f32")))
    b.store(m, X, strides=(16, 1))
    kernel = b.compile()
    kernel(x)            # x: a float32 array of 4 x 16
    print(kernel.source("ir"))

Accesses are unchecked unless `checked=True` (then elements outside `bounds`, 0 <= row < rows and
0 <= col < cols, read zero and are not written).

Every call checks its arrays against what the kernel can touch: compile() derives, for each
pointer parameter, the element offsets its loads and stores reach (from their positions, strides,
matrix shapes, checked bounds and loop ranges; evaluated again at each call when they depend on
scalar arguments or, on devices, on `groups`), and a call with an array too small for them, or a
read-only array the kernel writes, raises ValueError naming the parameter, the elements needed
and the shape given. An array is the sequence of its elements in C order: a non-contiguous array
goes through a C-order copy (written back when the kernel writes it). An unchecked access at a
position that depends on data (a matrix element, a loop-carried index) cannot be bounded and is
refused by compile(): make it checked, with bounds, and only elements inside the bounds are touched.
"""
from __future__ import annotations

import numbers

from . import _core
from ._cpu import CustomKernel
from .devices import resolve

__all__ = ["KernelBuilder", "CustomKernel"]

_BIN = ("add", "sub", "mul", "div", "rem", "min", "max")


def _matrix_dims(type_text: str) -> tuple[int, int]:
    inner = type_text[type_text.index("<") + 1 : -1].split(",")
    return int(inner[1]), int(inner[2])


class KernelBuilder:
    """Builds one kernel; see the module docstring."""

    def __init__(self, name: str = "kernel", subgroup_size: int = 16, *, subgroups: int = 1, _inner=None):
        """subgroups: subgroups per work-group on a device (a workgroup-scope matrix is spread over
        them); the CPU runs a work-group as one invocation whatever it is."""
        if _inner is not None:
            self._b, self._fn = _inner
        else:
            if isinstance(subgroups, bool) or not isinstance(subgroups, int):
                raise TypeError(f"subgroups must be an int, got {subgroups!r}")
            self._b, self._fn = _core.IRBuilder.create(name, subgroup_size, subgroups)
        self._params = [] if _inner is None else None

    def _region(self, core_builder) -> "KernelBuilder":
        return KernelBuilder(_inner=(core_builder, self._fn))

    # ---- values ------------------------------------------------------------------------------
    def _val(self, x, like: str | None = None):
        if isinstance(x, _core.IRValue):
            return x
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise TypeError(f"expected an IR value or a number, got {x!r}")
        if like is None or like == "index":
            if not isinstance(x, numbers.Integral):
                raise TypeError(f"an index needs an int, got {x!r}")
            return self._b.constant(int(x), "index")
        # Ints as they are (an integer type takes them exactly, inside its range; float types
        # round them once); other reals as floats.
        return self._b.constant(int(x) if isinstance(x, numbers.Integral) else float(x), like)

    def _result(self, where: str, out, like: str | None):
        """A value a region's function returned: an IR value, or a number made a constant of the
        type `like` in this (the region's) builder. Anything else is a TypeError naming it (it
        reached pybind11 as "Unable to cast Python instance of type ... to C++ type '?'")."""
        if isinstance(out, _core.IRValue):
            return out
        if like is not None and isinstance(out, numbers.Real) and not isinstance(out, bool):
            return self._val(out, like)
        raise TypeError(f"{where} must return {'an IR value or a number' if like else 'IR values'}, got {out!r}")

    def _pair(self, x, y):
        if isinstance(x, _core.IRValue):
            return x, self._val(y, x.type)
        if isinstance(y, _core.IRValue):
            return self._val(x, y.type), y
        return self._val(x), self._val(y)

    def param(self, name: str, type: str):
        """A kernel parameter: "ptr<f32>" (an array), "index" (an int), "f32" (a float), ..."""
        return self._b.param(name, type)

    def index(self, v: int):
        """An index constant (a signed 64-bit integer)."""
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or not -2**63 <= v < 2**63:
            raise ValueError(f"index({v!r}): an index constant is a whole number in [-2**63, 2**63)")
        return self._b.index(int(v))

    def const(self, v, dtype: str):
        return self._b.constant(v, dtype)

    def binary(self, op: str, x, y):
        x, y = self._pair(x, y)
        return self._b.binary(op, x, y)

    def add(self, x, y): return self.binary("add", x, y)
    def sub(self, x, y): return self.binary("sub", x, y)
    def mul(self, x, y): return self.binary("mul", x, y)
    def div(self, x, y): return self.binary("div", x, y)
    def rem(self, x, y): return self.binary("rem", x, y)
    def min(self, x, y): return self.binary("min", x, y)
    def max(self, x, y): return self.binary("max", x, y)
    def and_(self, x, y): return self.binary("and", x, y)
    def or_(self, x, y): return self.binary("or", x, y)

    def cmp(self, pred: str, x, y):
        x, y = self._pair(x, y)
        return self._b.cmp(pred, x, y)

    def lt(self, x, y): return self.cmp("lt", x, y)
    def le(self, x, y): return self.cmp("le", x, y)
    def gt(self, x, y): return self.cmp("gt", x, y)
    def ge(self, x, y): return self.cmp("ge", x, y)
    def eq(self, x, y): return self.cmp("eq", x, y)
    def ne(self, x, y): return self.cmp("ne", x, y)

    def select(self, cond, x, y):
        x, y = self._pair(x, y)
        return self._b.select(cond, x, y)

    def exp(self, x): return self._b.unary("exp", x)
    def log(self, x): return self._b.unary("log", x)
    def tanh(self, x): return self._b.unary("tanh", x)
    def sqrt(self, x): return self._b.unary("sqrt", x)
    def erf(self, x): return self._b.unary("erf", x)
    def abs(self, x): return self._b.unary("abs", x)
    def neg(self, x): return self._b.unary("neg", x)

    def convert(self, x, dtype: str):
        return self._b.convert(x, dtype)

    def work_id(self, kind: str, dim: int = 0):
        """A work-item id (index): "lane" (in the subgroup), "subgroup" (in the work-group),
        "subgroups" (per work-group), "group" / "groups" (along dim; launches are one-dimensional,
        so dims 1 and 2 read 0 and 1). On the CPU a work-group is one subgroup run by one worker
        thread (subgroup 0, subgroups 1; no lane id: its lanes are its vectors) and a kernel that
        reads "group" runs on the grid its call's groups= gives."""
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral) or not 0 <= dim <= 2:
            raise ValueError(f"work_id({kind!r}, dim={dim!r}): dim is 0, 1 or 2")
        return self._b.work_id(kind, int(dim))

    def flag_set(self, flags, i, value=None):
        """flags[i] = value (ptr<i32>; an i32 value or int, 1 when None), a release store at device
        scope: Stream-K's "partial tile ready"; 0 re-arms the flag."""
        if value is not None and not isinstance(value, _core.IRValue):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not -2**31 <= value < 2**31:
                raise ValueError(f"flag_set: value must be an i32 (an int in [-2^31, 2^31)), got {value!r}")
            value = self._b.constant(int(value), "i32")
        self._b.flag_set(flags, self._val(i), value)

    def flag_wait(self, flags, i, spin_limit: int = 0):
        """Spins until flags[i] != 0, an acquire load at device scope; on GPUs the subgroup leaves
        together. spin_limit > 0: the kernel traps (a launch error, not a hang) after that many polls."""
        if isinstance(spin_limit, bool) or not isinstance(spin_limit, numbers.Integral) or spin_limit < 0:
            raise ValueError(f"flag_wait: spin_limit must be an int >= 0 (0: no limit), got {spin_limit!r}")
        self._b.flag_wait(flags, self._val(i), int(spin_limit))

    # ---- work-group local memory (HLSL groupshared) -------------------------------------------------
    def groupshared(self, dtype: str, n: int):
        """HLSL's groupshared T Arr[n]: an array of n elements of dtype in work-group local memory,
        one per work-group, uninitialized (type groupshared<dtype, n>). load / store / accumulate
        address it like an array (strides in elements; HLSL 0035: Wave and ThreadGroup scope
        matrices), converting between dtype and the matrix's component type as convert_matrix
        does; load_element / store_element read and write single elements. Every access must stay
        inside the array (compile() or the call refuses one that may not). On the CPU a work-group
        is one invocation, so the array is that invocation's own."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"a groupshared array's length must be an int, got {n!r}")
        return self._b.groupshared(dtype, int(n))

    def barrier(self):
        """A work-group barrier (HLSL GroupMemoryBarrierWithGroupSync): every work-item of the
        work-group waits here, and the groupshared and buffer writes before it are seen after it.
        In control flow that is the same for the whole work-group only."""
        self._b.barrier()

    def load_element(self, ptr, i):
        """ptr[i]: one element of an array parameter or a groupshared array."""
        return self._b.load_element(ptr, self._val(i))

    def store_element(self, ptr, i, value):
        """ptr[i] = value (a number becomes the element type)."""
        elem = ptr.type[ptr.type.index("<") + 1 :].split(",")[0].rstrip(">").strip()
        self._b.store_element(ptr, self._val(i), self._val(value, elem))

    # ---- control flow ---------------------------------------------------------------------------
    def for_range(self, lb, ub, step=1, inits=(), body=None):
        """for i in range(lb, ub, step), carrying `inits`; body(b, i, *carried) returns the next
        carried values. Returns the final carried values (a list)."""
        inits = list(inits)
        for v in inits:
            if not isinstance(v, _core.IRValue):
                raise TypeError(f"for_range: inits must be IR values (b.const(value, dtype) for a number), got {v!r}")

        def run(core, i, iters):
            rb = self._region(core)
            out = _as_list(body(rb, i, *iters))
            return [rb._result("for_range's body", v, inits[k].type if k < len(inits) else None)
                    for k, v in enumerate(out)]
        return self._b.for_(self._val(lb), self._val(ub), self._val(step), inits, run)

    def if_(self, cond, then, else_=None, types=()):
        """then(b) / else_(b) return the values of `types` (a list of type strings)."""
        types = list(types)

        def wrap(fn, where):
            if fn is None:
                return None

            def run(core):
                rb = self._region(core)
                return [rb._result(where, v, types[k] if k < len(types) else None)
                        for k, v in enumerate(_as_list(fn(rb)))]
            return run
        return self._b.if_(cond, types, wrap(then, "if_'s then"), wrap(else_, "if_'s else_"))

    # ---- matrices ---------------------------------------------------------------------------------
    def _access(self, type_text, ptr, row, col, strides, bounds):
        rows, cols = _matrix_dims(type_text)
        if bounds is None:
            bounds = (rows, cols)
        return [ptr, self._val(row), self._val(col), self._val(strides[0]), self._val(strides[1]),
                self._val(bounds[0]), self._val(bounds[1])]

    def _optimal(self, what, type_text, ptr, row, col, strides, layout):
        """(ptr, row, col, strides) of an access in one of HLSL 0035's implementation-chosen
        layouts (coopjit.layout.optimal_strides): thread-scope matrices only (0035's Load and
        Accumulate layout tables); no strides (0035: Stride is 0); row is the element where the
        packed matrix starts (0035's StartOffset), col 0."""
        from .layout import OPTIMAL_LAYOUTS, optimal_strides

        if layout not in OPTIMAL_LAYOUTS:
            raise ValueError(f"{what}: unknown layout {layout!r} (known: None for strides=, "
                             f"{', '.join(map(repr, OPTIMAL_LAYOUTS))})")
        inner = type_text[type_text.index("<") + 1 : -1].split(",")
        use, scope = inner[3].strip(), inner[4].strip()
        if scope != "thread":
            raise ValueError(f"{what}: layout {layout!r} is for thread-scope matrices (HLSL 0035: {scope} scope loads, "
                             f"stores and accumulates take RowMajor or ColMajor), got {type_text}")
        if strides is not None:
            raise ValueError(f"{what}: layout {layout!r} chooses its own strides (HLSL 0035: Stride is 0), got "
                             f"strides={strides}")
        if not (isinstance(col, numbers.Integral) and not isinstance(col, bool) and col == 0):
            raise ValueError(f"{what}: with layout {layout!r}, row is the element where the matrix starts and col "
                             f"must be 0, got col={col!r}")
        rows, cols = _matrix_dims(type_text)
        start = ptr if (isinstance(row, numbers.Integral) and row == 0) else self._b.ptr_offset(ptr, self._val(row))
        return start, optimal_strides(layout, rows, cols, use)

    def load(self, type: str, ptr, row=0, col=0, strides=None, bounds=None, checked=False, layout=None):
        """The matrix at element (row, col) of a tensor with the given element strides (default
        (1, 1)); or, with layout="mul_optimal" / "outer_product_optimal" (HLSL 0035's MulOptimal /
        OuterProductOptimal, thread-scope matrices), the matrix packed in the layout coopjit
        chooses (coopjit.layout.optimal_strides), starting at element `row`."""
        if layout is not None:
            ptr, strides = self._optimal("load", type, ptr, row, col, strides, layout)
            row = 0
        return self._b.load(type, self._access(type, ptr, row, col, strides or (1, 1), bounds), checked)

    def store(self, m, ptr, row=0, col=0, strides=(1, 1), bounds=None, checked=False):
        self._b.store(m, self._access(m.type, ptr, row, col, strides, bounds), checked)

    def accumulate(self, m, ptr, row=0, col=0, strides=None, bounds=None, layout=None):
        """Atomically adds the accumulator matrix into memory (row or column major by strides, default
        (1, 1)), in its component type (any: 8- and 16-bit ones by compare-and-swap on GPUs), only the
        elements inside `bounds`. A thread-scope matrix: each work-item adds its own, also in
        layout="outer_product_optimal" (HLSL 0035's OuterProductOptimal: the layout coopjit chooses,
        starting at element `row`; a load in the same layout reads it back). Into a groupshared
        array of another type: each element converted to the array's type and added in it."""
        if layout is not None:
            if layout != "outer_product_optimal":
                raise ValueError(f"accumulate: layout {layout!r}: HLSL 0035 accumulates thread-scope matrices in "
                                 "'outer_product_optimal' only (others: strides=)")
            ptr, strides = self._optimal("accumulate", m.type, ptr, row, col, strides, layout)
            row = 0
        self._b.accumulate(m, self._access(m.type, ptr, row, col, strides or (1, 1), bounds))

    def accumulator_layout(self):
        """HLSL 0035's linalg::AccumulatorLayout() as an index constant: 1 (MatrixUse::B; 0 would be
        A), the use whose layout coopjit's accumulators share on every target (see
        coopjit.layout.accumulator_layout)."""
        from .layout import accumulator_layout

        return self._b.index({"a": 0, "b": 1}[accumulator_layout()])

    def splat(self, type: str, value):
        return self._b.splat(type, self._val(value, _component(type)))

    def mul_add(self, a, b, c): return self._b.mul_add(a, b, c)
    def scale(self, m, s): return self._b.scale(m, self._val(s, _component(m.type)))
    def matrix_binary(self, op, x, y): return self._b.matrix_binary(op, x, y)

    def reduce(self, m, mode: str, result: str, combine="add"):
        """mode: row, column, both, 2x2; combine: add, mul, min, max or fn(b, x, y)."""
        if callable(combine):
            fn = combine

            def combine(core, x, y):
                rb = self._region(core)
                return rb._result("reduce's combine function", fn(rb, x, y), x.type)
        return self._b.reduce(m, mode, result, combine)

    def per_element(self, m, fn, extras=()):
        """fn(b, row, col, value, *extra elements) -> the new element, for every element."""
        comp = _component(m.type)

        def run(core, *args):
            rb = self._region(core)
            return rb._result("per_element's function", fn(rb, *args), comp)
        return self._b.per_element(m, list(extras), run)

    def convert_matrix(self, m, type: str): return self._b.convert_matrix(m, type, False)
    def cast(self, m, type: str): return self._b.convert_matrix(m, type, True)
    def transpose(self, m): return self._b.transpose(m)
    def length(self, m): return self._b.length(m)
    def get(self, m, i): return self._b.get(m, self._val(i))
    def set(self, m, i, v): return self._b.set(m, self._val(i), self._val(v, _component(m.type)))
    def get_coordinate(self, m, i): return self._b.get_coordinate(m, self._val(i))
    def sum_accumulate(self, a, b, c): return self._b.sum_accumulate(a, b, c)
    def outer_product(self, x, y, result: str): return self._b.outer_product(x, y, result)

    def vector_multiply(self, v, m, result: str, bias=None):
        """vector x (thread-scope b) matrix, plus an optional bias vector."""
        return self._b.vector_multiply(v, m, bias, result)

    def vector_load(self, type: str, ptr, offset=0, stride=1):
        return self._b.vector_load(type, ptr, self._val(offset), self._val(stride))

    def vector_store(self, v, ptr, offset=0, stride=1):
        self._b.vector_store(v, ptr, self._val(offset), self._val(stride))

    # ---- the kernel ----------------------------------------------------------------------------------
    def ir(self) -> str:
        """The kernel IR as text (the one printer)."""
        return self._fn.text()

    def compile(self, device: str | None = None) -> "CustomKernel":
        """Verifies, lowers and JIT-compiles the kernel (or takes it from the cache); with a SPIR-V
        device ("opencl:0"), lowers it per work-item (SIMT) to SPIR-V for that device instead
        (call the result with groups=<work-groups>)."""
        return resolve(device).compile_kernel(self._fn)


def _component(type_text: str) -> str:
    """The scalar type of a matrix's elements: f32 of coopmatrix<f32, ...> and of
    coopmatrix<snorm_f32, ...> (HLSL 0035's SNorm / UNorm components hold floats)."""
    c = type_text[type_text.index("<") + 1 : type_text.index(",")].strip()
    return c[6:] if c.startswith(("snorm_", "unorm_")) else c


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]
