"""GEMM and matmul: argument checks, then the C++ core (spec -> plan -> IR -> LLVM -> run)."""
from __future__ import annotations

import numpy as np

from . import _core
from ._display import KernelDisplay
from ._arrays import (
    as_array,
    check_device,
    check_gemm_dtype,
    check_same_dtype,
    check_scalar,
    kernel_readable,
    overlaps,
    short_name,
)

_LAYOUTS = {"row": 0, "col": 1}
_SPLITS = {"dp": 0, "sk": 1, "sk+dp": 2}
PLAN_FIELDS = ("layout", "mr", "nr", "kb", "kt", "threads", "split")


def _overrides(plan: dict | None) -> dict:
    """Plan overrides as the core takes them, from {'layout': 'row'|'col', 'split': 'dp'|'sk'|'sk+dp',
    'mr': 8, 'nr': 32, 'kb': 4, 'kt': 256, 'threads': 2}."""
    if not plan:
        return {}
    out = {}
    for key, value in plan.items():
        if key == "layout":
            if value not in _LAYOUTS:
                raise ValueError(f"plan layout must be 'row' or 'col', got {value!r}")
            out[key] = _LAYOUTS[value]
        elif key == "split":
            if value not in _SPLITS:
                raise ValueError(f"plan split must be one of {', '.join(_SPLITS)}, got {value!r}")
            out[key] = _SPLITS[value]
        elif key in ("mr", "nr", "kb", "kt", "threads"):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"plan {key} must be an int, got {value!r}")
            out[key] = int(value)
        else:
            raise ValueError(f"unknown plan field {key!r}; known: {', '.join(PLAN_FIELDS)}")
    return out


def _run(a2, b2, c2, alpha, beta, plan):
    """c2 = alpha * a2 @ b2 + beta * c2 for 2-D operands already checked; handles aliasing."""
    a2 = kernel_readable(a2)
    b2 = kernel_readable(b2)
    target = c2
    if overlaps(c2, a2, b2) or kernel_readable(c2) is not c2:
        target = np.array(c2) if beta != 0.0 else np.empty(c2.shape, c2.dtype)
    if target.size:
        _core.gemm(a2, b2, target, alpha, beta, _overrides(plan))
    if target is not c2:
        c2[...] = target


def gemm(a, b, c=None, *, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, device=None, plan=None):
    """c = alpha * op(a) @ op(b) + beta * c, with op(x) = x.T when trans_x; returns c.

    a and b are 2-D float32 or float64 arrays of one dtype, taken as they are (any strides,
    views, negative strides: transposes are views, nothing is copied when the kernel can read
    the strides). When `c` is given it is updated in place; when it is None a new array is
    returned. As in BLAS, beta == 0 means c is not read (NaN or Inf in c do not propagate);
    non-finite alpha and beta otherwise propagate like NumPy's alpha * (a @ b) + beta * c.
    `plan` overrides fields of the chosen plan (layout, mr, nr, kb).
    """
    check_device(device)
    a = as_array(a, "a")
    b = as_array(b, "b")
    alpha = check_scalar(alpha, "alpha")
    beta = check_scalar(beta, "beta")
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise ValueError(f"gemm: {name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    check_gemm_dtype(a, "a")
    check_gemm_dtype(b, "b")
    dtype = check_same_dtype(a=a, b=b)
    opa = a.T if trans_a else a
    opb = b.T if trans_b else b
    if opa.shape[1] != opb.shape[0]:
        raise ValueError(
            f"gemm: op(a) has shape {opa.shape} and op(b) has shape {opb.shape} "
            f"(a {a.shape}, trans_a={trans_a}; b {b.shape}, trans_b={trans_b}): inner dimensions differ"
        )
    shape = (opa.shape[0], opb.shape[1])
    if c is None:
        c = np.empty(shape, dtype)
        beta = 0.0
    else:
        if not isinstance(c, np.ndarray):
            raise TypeError(f"c must be a NumPy array, got {type(c).__name__}")
        check_same_dtype(a=a, c=c)
        if c.shape != shape:
            raise ValueError(f"gemm: c has shape {c.shape} but op(a) @ op(b) has shape {shape}")
        if not c.flags.writeable:
            raise ValueError("gemm: c is read-only; pass a writeable array")
    _run(opa, opb, c, alpha, beta, plan)
    return c


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


def _batched(a, b, out, plan):
    """out[...] = a @ b over broadcast batch dims, as one kernel launch (at most 2 batch levels)."""
    batch = out.shape[:-2]
    A = np.broadcast_to(a, batch + a.shape[-2:])
    B = np.broadcast_to(b, batch + b.shape[-2:])
    if out.size == 0:
        return
    C = out
    if overlaps(out, a, b) or any(s % out.itemsize for s in out.strides):
        C = np.empty(out.shape, out.dtype)
    A, B = kernel_readable(A), kernel_readable(B)
    dims = _collapse_batch([A, B, C], batch)
    if len(dims) > 2:  # batch dims no stride pattern can merge: make the operands contiguous
        A, B = np.ascontiguousarray(A), np.ascontiguousarray(B)
        if C is out:
            C = np.empty(out.shape, out.dtype)
        dims = _collapse_batch([A, B, C], batch)
    views = []
    for j, x in enumerate((A, B, C)):
        shape = tuple(n for n, _ in dims) + x.shape[-2:]
        strides = tuple(st[j] for _, st in dims) + x.strides[-2:]
        views.append(np.lib.stride_tricks.as_strided(x, shape, strides, writeable=x is C))
    _core.gemm(views[0], views[1], views[2], 1.0, 0.0, _overrides(plan))
    if C is not out:
        out[...] = C


def matmul(a, b, *, out=None, device=None, plan=None):
    """a @ b with numpy.matmul semantics (float32 or float64): 1-D operands are promoted and
    their dim removed, N-D operands are stacks of matrices broadcast over the leading dims,
    computed in one kernel launch."""
    if out is None and device is None and plan is None:
        c = _core.matmul2d(a, b)  # the per-call fast path; None when it does not apply
        if c is not None:
            return c
    check_device(device)
    a = as_array(a, "a")
    b = as_array(b, "b")
    for name, x in (("a", a), ("b", b)):
        if x.ndim == 0:
            raise ValueError(f"matmul: {name} is 0-d (a scalar); matmul needs 1-D or 2-D operands")
    check_gemm_dtype(a, "a")
    check_gemm_dtype(b, "b")
    dtype = check_same_dtype(a=a, b=b)
    a2 = a[np.newaxis, :] if a.ndim == 1 else a
    b2 = b[:, np.newaxis] if b.ndim == 1 else b
    if a2.shape[-1] != b2.shape[-2]:
        raise ValueError(
            f"matmul: a has shape {a.shape} and b has shape {b.shape}: inner dimensions differ "
            f"({a2.shape[-1]} != {b2.shape[-2]})"
        )
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dims of a {a.shape} and b {b.shape} do not broadcast") from None
    shape = batch + (a2.shape[-2], b2.shape[-1])
    result_shape = batch + tuple(s for s, keep in zip(shape[-2:], (a.ndim >= 2, b.ndim >= 2)) if keep)
    if out is None:
        out = np.empty(result_shape, dtype)
    else:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a NumPy array, got {type(out).__name__}")
        if out.dtype != dtype:
            raise TypeError(f"out has dtype {out.dtype} but the result has dtype {dtype}")
        if out.shape != result_shape:
            raise ValueError(f"matmul: out has shape {out.shape} but a @ b has shape {result_shape}")
        if not out.flags.writeable:
            raise ValueError("matmul: out is read-only; pass a writeable array")
    # The result with the dims of 1-D operands put back: always a view of out.
    out_full = out
    if a.ndim == 1:
        out_full = np.expand_dims(out_full, -2 if b.ndim >= 2 else -1)
    if b.ndim == 1:
        out_full = np.expand_dims(out_full, -1)
    if batch:
        _batched(a2, b2, out_full, plan)
    else:
        _run(a2, b2, out_full, 1.0, 0.0, plan)
    return out


class Kernel(KernelDisplay):
    """A compiled GEMM kernel for one problem: call it with arrays of that problem, repeatedly.

    `config` is the plan as a dict; `source("ir" | "llvm" | "asm")` the generated code; print
    it (or show it in Jupyter) for its plan.
    """

    def __init__(self, m, n, k, dtype, trans_a, trans_b, accumulate, plan):
        self.m, self.n, self.k = m, n, k
        self.dtype = dtype
        self.trans_a, self.trans_b, self.accumulate = trans_a, trans_b, accumulate
        # The strides the kernel is planned for: contiguous a, b and c (transposes as views).
        sa = (1, m) if trans_a else (k, 1)
        sb = (1, k) if trans_b else (n, 1)
        self._plan = plan
        self._core = _core.compile_gemm(short_name(dtype), m, n, k, [*sa, *sb, n, 1], accumulate, _overrides(plan))

    @property
    def config(self) -> dict:
        """The plan as a dict (layout, tile sizes, vector width, ...)."""
        return dict(self._core.config)

    def source(self, kind: str = "ir") -> str:
        """The kernel as kernel IR ("ir"), optimized LLVM IR ("llvm") or host assembly ("asm")."""
        return self._core.source(kind)

    def __call__(self, a, b, c=None, *, alpha=1.0, beta=0.0):
        a = as_array(a, "a")
        b = as_array(b, "b")
        alpha = check_scalar(alpha, "alpha")
        beta = check_scalar(beta, "beta")
        ashape = (self.k, self.m) if self.trans_a else (self.m, self.k)
        bshape = (self.n, self.k) if self.trans_b else (self.k, self.n)
        for name, x, want in (("a", a, ashape), ("b", b, bshape)):
            if x.dtype != self.dtype:
                raise TypeError(f"{name} has dtype {x.dtype}; this kernel was compiled for {self.dtype}")
            if x.shape != want:
                raise ValueError(f"{name} has shape {x.shape}; this kernel was compiled for {want}")
        if beta != 0.0 and not self.accumulate:
            raise ValueError(f"beta={beta} needs a kernel compiled with accumulate=True")
        if c is None:
            c = np.empty((self.m, self.n), self.dtype)
            beta = 0.0
        elif not isinstance(c, np.ndarray) or c.dtype != self.dtype or c.shape != (self.m, self.n):
            raise ValueError(
                f"c must be a {self.dtype} array of shape {(self.m, self.n)}, got "
                f"{getattr(c, 'dtype', type(c).__name__)} {getattr(c, 'shape', '')}"
            )
        elif not c.flags.writeable:
            raise ValueError("c is read-only; pass a writeable array")
        opa = a.T if self.trans_a else a
        opb = b.T if self.trans_b else b
        target = c if not overlaps(c, a, b) else (np.array(c) if beta != 0.0 else np.empty_like(c))
        if target.size:
            self._core.run(kernel_readable(opa), kernel_readable(opb), target, alpha, beta)
        if target is not c:
            c[...] = target
        return c

    def __repr__(self):
        cfg = self.config
        return (
            f"Kernel(gemm {self.dtype} M={self.m} N={self.n} K={self.k} trans_a={self.trans_a} "
            f"trans_b={self.trans_b} accumulate={self.accumulate}; plan layout={cfg['layout']} "
            f"tile={cfg['mr']}x{cfg['nr']} kb={cfg['kb']} simd={cfg['simd_width']})"
        )


def compile_gemm(m, n, k, dtype=np.float32, *, trans_a=False, trans_b=False, accumulate=False,
                 device=None, plan=None) -> Kernel:
    """Compiles (or fetches from the cache) the GEMM kernel for one problem.

    The kernel computes c = alpha * op(a) @ op(b) (+ beta * c when `accumulate`) for a of shape
    (m, k) ((k, m) when trans_a), b of shape (k, n) ((n, k) when trans_b), planned for
    contiguous arrays. `plan` overrides plan fields (layout, mr, nr, kb).
    """
    check_device(device)
    for name, v in (("m", m), ("n", n), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"compile_gemm: {name} must be a non-negative int, got {v!r}")
    dtype = np.dtype(dtype)
    if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"compile_gemm: dtype {dtype} is not supported; supported: float32, float64")
    return Kernel(int(m), int(n), int(k), dtype, bool(trans_a), bool(trans_b), bool(accumulate), plan)
