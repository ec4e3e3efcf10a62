"""GEMM and matmul: argument checks, then the C++ core (spec -> plan -> IR -> LLVM -> run)."""
from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _core, _cuda_arrays, _cuda_fast, _gemm_fused
from ._arrays import (GEMM_SUPPORTED, _collapse_batch, as_array, as_dtype, beta_without_c, check_own_elements,
                      check_scalar, contiguous, gemm_types, int_scalar, kernel_readable, native_dtype, native_order,
                      overlaps, promote)
from ._cpu import Kernel, ScaledOnce
from ._epilogue import Epilogue, requested
from ._kernel_args import _GPU_FIELDS, PLAN_FIELDS, _gpu_overrides, _overrides  # noqa: F401 (tests, benchmarks read them here)
from ._plan import Plan, from_core
from .devices import check_device, get


class PackedMatrix:
    """A right-hand operand packed once for many products (coopjit.prepack): nr-column panels,
    zero-padded, as the packed kernels read them. bfloat16 and int8 weights stay in their type,
    VNNI-packed (pairs / quads of consecutive K elements side by side) when the CPU has the dot
    instructions (AVX512-BF16, AVX512-VNNI), with the column sums an s8 x s8 product needs;
    otherwise, and for the other types, the panels hold the accumulator type (converted here,
    once). `format` says which."""

    # The A type a product with this B is planned for (int8 weights: s8 activations).
    _A_FOR_B = {"uint8": np.int8}

    def __init__(self, b: np.ndarray, plan: dict | None = None, a_dtype: DTypeLike | None = None) -> None:
        b = native_order(b)
        a_dtype = native_dtype(self._A_FOR_B.get(b.dtype.name, b.dtype) if a_dtype is None else a_dtype)
        try:
            types, _ = gemm_types(a_dtype, b.dtype)
        except TypeError:
            raise TypeError(f"prepack: b has dtype {b.dtype}; coopjit GEMM supports {GEMM_SUPPORTED}") from None
        self._a_dtype = a_dtype
        self._variants = {}  # packings of this B for products with other A dtypes (u8 x u8, ...)
        self.dtype = b.dtype
        self.shape = b.shape
        k, n = b.shape
        if isinstance(plan, Plan):
            plan = plan.overrides()
        overrides = _overrides(plan)  # (first: TypeError / ValueError naming what plan= holds)
        self._fields = dict(plan or {})  # plan fields the packing was planned with, kept for the products
        fmt = _core.prepack_format(list(types), k, n, overrides)
        self.format = fmt
        self.nr, self.kb, self.vnni = fmt["nr"], fmt["kb"], fmt["vnni"]
        kp = -(-k // self.kb) * self.kb
        np_ = -(-n // self.nr) * self.nr
        if self.vnni > 1:
            elem = b.dtype
        else:
            elem = np.dtype(np.int32) if types[2] == "i32" else np.dtype(np.float64 if b.dtype == np.float64 else np.float32)
        self._elem, self._kp, self._np = np.dtype(elem), kp, np_
        padded = np.zeros((kp, np_), elem)
        padded[:k, :n] = b.astype(elem)
        self.buffer = np.zeros(fmt["bytes"], np.uint8)
        self._write_panels(padded, fmt)
        if fmt["bytes"] > fmt["panel_bytes"]:  # s8 in quads: 128 * the column sums, int32
            sums = (128 * padded.sum(axis=0, dtype=np.int64)).astype(np.int32)
            self.buffer[fmt["panel_bytes"]:] = sums.view(np.uint8)
        self._dummy = np.zeros((1, n), b.dtype)  # stands for B in the spec; never read

    def _write_panels(self, padded: np.ndarray, fmt: dict) -> None:
        """The panels into self.buffer. Panel q holds Kp / w groups, each nr columns of w
        consecutive K elements (w = 1: row-major); AMX plans with amx_feed 2 store each K step of
        kb as its nr / 16 tiles (kb / w groups of 16 columns of w elements each), one after the
        other. A group of w elements is one 4-byte word (bf16 pairs, 8-bit quads), so the groups
        are built first, as words, and each panel is then one strided copy of whole rows: NumPy's
        copy of the whole transposed array walked it element by element (4096^2 float32: 0.5 s)."""
        w, kb, nr = self.vnni, self.kb, self.nr
        kp, np_ = padded.shape
        item = padded.dtype.itemsize
        if w == 1:
            words = padded
        elif w * item == 4 and sys.byteorder == "little":
            # word = element 0 | element 1 << (8 * item) | ...: the w elements in memory order
            lanes = padded.view(np.uint8 if item == 1 else np.uint16).reshape(kp // w, w, np_)
            words = lanes[:, 0, :].astype(np.uint32)
            for i in range(1, w):
                words |= lanes[:, i, :].astype(np.uint32) << np.uint32(8 * item * i)
        else:  # (no such format today) element by element
            if fmt["amx_tiles"]:
                panels = padded.reshape(kp // kb, kb // w, w, np_ // nr, nr // 16, 16).transpose(3, 0, 4, 1, 5, 2)
            else:
                panels = padded.reshape(kp // w, w, np_ // nr, nr).transpose(2, 0, 3, 1)
            body = np.ascontiguousarray(panels).view(np.uint8).reshape(-1)
            self.buffer[: body.size] = body
            return
        rows = kp // w  # groups along K
        out = self.buffer[: rows * np_ * words.dtype.itemsize].view(words.dtype)
        if fmt["amx_tiles"]:
            out = out.reshape(np_ // nr, kp // kb, nr // 16, kb // w, 16)
            steps = words.reshape(kp // kb, kb // w, np_)
            for q in range(np_ // nr):
                tiles = steps[:, :, q * nr:(q + 1) * nr].reshape(kp // kb, kb // w, nr // 16, 16)
                np.copyto(out[q], tiles.transpose(0, 2, 1, 3))
        else:
            out = out.reshape(np_ // nr, rows, nr)
            for q in range(np_ // nr):
                np.copyto(out[q], words[:, q * nr:(q + 1) * nr])

    def unpacked(self) -> np.ndarray:
        """The K x N matrix this was packed from (read back from the panels)."""
        w, k, n = self.vnni, *self.shape
        body = self.buffer[: self._kp * self._np * self._elem.itemsize].view(self._elem)
        if self.format["amx_tiles"]:
            panels = body.reshape(self._np // self.nr, self._kp // self.kb, self.nr // 16, self.kb // w, 16, w)
            return panels.transpose(1, 3, 5, 0, 2, 4).reshape(self._kp, self._np)[:k, :n].astype(self.dtype)
        panels = body.reshape(self._np // self.nr, self._kp // w, self.nr, w)
        return panels.transpose(1, 3, 0, 2).reshape(self._kp, self._np)[:k, :n].astype(self.dtype)

    def _for_a(self, a_dtype) -> "PackedMatrix":
        """This packing, or (made once, kept) the one a product with an A of `a_dtype` reads: the
        panel format depends on both types (u8 x u8 has no VNNI dot instruction, s8 x s8 needs
        column sums)."""
        a_dtype = native_dtype(a_dtype)
        if a_dtype == self._a_dtype:
            return self
        key = a_dtype.str
        if key not in self._variants:
            gemm_types(a_dtype, self.dtype)  # TypeError naming both dtypes
            self._variants[key] = PackedMatrix(self.unpacked(), self._fields, a_dtype)
        return self._variants[key]

    def _plan(self, plan):
        forced = {**self._fields, "layout": "row", "pack": True, "prepacked_b": True, "nr": self.nr, "kb": self.kb,
                  "vnni": self.vnni}
        out = dict(plan.overrides() if isinstance(plan, Plan) else plan or {})
        for key, value in forced.items():
            if key in out and out[key] != value:
                raise ValueError(f"plan {key}={out[key]!r} does not fit a prepacked operand (needs {value!r})")
            out[key] = value
        return out

    # `a @ packed` (a NumPy array on the left defers to __rmatmul__: no ufunc may take this object).
    __array_ufunc__ = None

    def __rmatmul__(self, a) -> np.ndarray:
        return matmul(a, self)

    def __matmul__(self, other):
        raise TypeError(_PACKED_ON_THE_LEFT)

    def __setstate__(self, state: dict) -> None:
        """Unpickling: the panels are this machine's format, or repacked into it. A packing made
        on another CPU (a Dask worker's, or under COOPJIT_CPU_LEVEL) has the panels of that CPU's
        vector width and dot instructions; its products here were refused with errors about plan
        fields the user never passed ("plan override nr=8 must be a multiple of the vector width
        16", "plan vnni=2 needs packed panels ...")."""
        self.__dict__.update(state)
        try:
            types, _ = gemm_types(self._a_dtype, self.dtype)
            fmt = _core.prepack_format(list(types), self.shape[0], self.shape[1], _overrides(self._fields))
        except (TypeError, ValueError):  # the packing's own plan fields do not apply here: its products say so
            return
        if fmt != self.format:
            self.__dict__.update(PackedMatrix(self.unpacked(), self._fields, self._a_dtype).__dict__)

    def __repr__(self):
        vnni = f", VNNI groups of {self.vnni}" if self.vnni > 1 else ""
        return f"PackedMatrix({self.dtype} {self.shape[0]}x{self.shape[1]}, panels of {self.nr} columns{vnni})"


_PACKED_ON_THE_LEFT = ("a prepacked operand (coopjit.prepack) is the right-hand operand of a product: matmul(a, packed), "
                       "gemm(a, packed) or a @ packed; prepack the other operand, or pass the array itself")


def prepack(b: ArrayLike, plan: dict | None = None) -> PackedMatrix:
    """Packs the right-hand operand of matmul/gemm once, for a weight used in many products.
    `plan`: plan fields the packing and every product with it follow (for example
    {"amx": "emulated"}, or {"vnni": 1})."""
    b = as_array(b, "b")
    if b.ndim != 2:
        raise ValueError(f"prepack: b must be 2-D, got shape {b.shape}")
    return PackedMatrix(b, plan)


def _run_prepacked(a, pb: PackedMatrix, c, alpha, beta, plan):
    if a.ndim != 2 or a.shape[1] != pb.shape[0]:
        raise ValueError(f"a has shape {a.shape} but the packed b is {pb.shape}: inner dimensions differ (a must be 2-D "
                         f"with {pb.shape[0]} columns)")
    types, _ = gemm_types(a.dtype, pb.dtype, c.dtype)
    pb = pb._for_a(a.dtype)
    b_view = np.broadcast_to(pb._dummy, pb.shape)
    a = kernel_readable(a)
    target = c if kernel_readable(c) is c and not overlaps(c, a) else np.empty(c.shape, native_dtype(c.dtype))
    if target is not c and beta != 0.0:
        target[...] = c
    if target.size:
        if _core.gemm(a, b_view, target, alpha, beta, _overrides(pb._plan(plan)), types, pb.buffer, None, True):
            raise ScaledOnce
    if target is not c:
        c[...] = target


def _is_one(x) -> bool:
    return (type(x) is float or type(x) is int) and x == 1


def _is_zero(x) -> bool:
    return (type(x) is float or type(x) is int) and x == 0


def gemm(a: ArrayLike, b: ArrayLike | PackedMatrix, c: np.ndarray | None = None, *, alpha: float = 1.0,
         beta: float = 0.0, trans_a: bool = False, trans_b: bool = False, device: str | None = None,
         plan: dict | None = None, bias: ArrayLike | None = None, bias_axis: int = 1, activation: str | None = None,
         residual: ArrayLike | None = None, scale: ArrayLike | None = None, row_scale: ArrayLike | None = None,
         epilogue: Callable | None = None, out_dtype: DTypeLike | None = None) -> np.ndarray:
    """c = alpha * op(a) @ op(b) + beta * c, with op(x) = x.T when trans_x; returns c.

    a and b are 2-D arrays of one dtype (float32, float64, float16, bfloat16, float8_e4m3fn,
    float8_e5m2; or an int8 / uint8 pair, int32 out), or b a PackedMatrix (coopjit.prepack), taken
    as they are (any strides, views, negative strides: transposes are views, nothing is copied when
    the kernel can read the strides); NumPy arrays, PyTorch CPU tensors, DLPack and buffer objects.
    When `c` is given (any writable array of those kinds, of the product's output dtype: float32 or
    the input type for 16-bit floats) it is updated in place and returned; when it is None a new
    NumPy array is returned (beta must then be 0). As in BLAS, beta == 0 means c is not read (NaN
    or Inf in c do not propagate); non-finite alpha and beta otherwise propagate like NumPy's
    alpha * (a @ b) + beta * c.
    Integer products (int8 / uint8) take integer alpha and beta (within int64) exactly: they compute
    in int32, which wraps, so the result is NumPy's in int64 cast to int32; float products round
    integers past 2^53 to a double, as NumPy's float64 does. With an epilogue an int8 product writes
    floats, and alpha is then any real number, applied in float (folded into the scale step).
    `plan` (a dict, or a kernel's .config) overrides fields of the chosen plan (below).
    The fused epilogue (bias=, bias_axis=, activation=, residual=, scale=, row_scale=, epilogue=,
    out_dtype=) is matmul's, with beta * c added after the scales and before the bias:
    ``y = alpha * op(a) @ op(b) * scale * row_scale + beta * c + bias``, then the activation, the
    residual, the function and the conversion to c's dtype (float products only take beta then).
    Without c, beta must be 0 (a ValueError names it): there is no c to add.
    """
    if c is None and not (type(beta) is float and beta == 0.0):
        beta_without_c("gemm: ", beta)
    if (plan is None and device is None and type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2
            and b.ndim == 2 and (c is None or (type(c) is np.ndarray and c.ndim == 2)) and _is_one(alpha)
            and _is_zero(beta) and bias is None and activation is None and residual is None and scale is None
            and row_scale is None and epilogue is None and out_dtype is None):
        # The plain product of NumPy matrices (alpha 1, beta 0, no plan or epilogue) is matmul's:
        # its per-call fast path (None when anything is out of the ordinary: then the full path
        # below, which also gives the errors). The full path cost ~25 us a call (8x8x8: 27.5 us
        # against matmul's 1.8 on the 2-core guest).
        got = _core.matmul_fast(a.T if trans_a else a, b.T if trans_b else b, c)
        if got is not None:
            return got
    if out_dtype is not None:  # ('bfloat16' / 'bf16' / torch.bfloat16 as well as NumPy's forms)
        out_dtype = as_dtype(out_dtype, "gemm: out_dtype")
    if (type(a) is not np.ndarray and device is None and bias is None and activation is None and residual is None
            and scale is None and row_scale is None and epilogue is None and out_dtype is None):
        # torch CUDA tensors' fast path
        got = _cuda_fast.gemm(a, b, c, alpha, beta, trans_a, trans_b, _gemm_fused._device_product, plan)
        if got is not None:
            return got
    elif type(a) is not np.ndarray and device is None and epilogue is None:
        # torch CUDA tensors with an epilogue of torch CUDA tensors: the fast path too
        got = _cuda_fast.gemm_fused(a, b, c, alpha, beta, trans_a, trans_b, bias, bias_axis, activation, residual, scale,
                                    row_scale, out_dtype, _gemm_fused._device_product, plan)
        if got is not None:
            return got
    fused_kw = {"bias": bias, "activation": activation, "residual": residual, "scale": scale, "row_scale": row_scale,
                "epilogue": epilogue, "out_dtype": out_dtype}
    if isinstance(c, np.ndarray) and c.flags.writeable:  # (a read-only c is named as that below)
        check_own_elements(c, "c", "gemm")
    if any(_cuda_arrays.is_device_array(x) for x in (a, b, c) if x is not None and type(x) is not np.ndarray):
        fused_kw["bias_axis"] = bias_axis
        return _gemm_fused._device_product("gemm", a, b, c, alpha, beta, trans_a, trans_b, device, plan, fused_kw)
    if isinstance(a, PackedMatrix):
        raise TypeError(f"gemm: {_PACKED_ON_THE_LEFT}")
    device = check_device(device)
    if requested(fused_kw):
        return _gemm_fused._gemm_fused(a, b, c, alpha, beta, trans_a, trans_b, plan, bias_axis, fused_kw, device,
                                       isinstance(b, PackedMatrix))
    if c is not None and type(c) is not np.ndarray:  # a tensor / DLPack / buffer c: updated in its memory
        gemm(a, b, as_array(c, "c", writable=True), alpha=alpha, beta=beta, trans_a=trans_a, trans_b=trans_b,
             device=device, plan=plan)
        return c
    a = native_order(as_array(a, "a"))
    alpha_in, beta_in = alpha, beta  # (integer products take integers exactly: int_scalar)
    alpha = check_scalar(alpha, "alpha")
    beta = check_scalar(beta, "beta")
    if isinstance(c, np.ndarray) and not c.dtype.isnative:
        # A big-endian (non-native) c: the product goes into a native copy, swapped back into c.
        if not c.flags.writeable:
            raise ValueError(f"gemm: c ({c.dtype} {c.shape}) is read-only; pass a writeable array")
        nd = native_dtype(c.dtype)
        tmp = c.astype(nd) if beta != 0.0 else np.empty(c.shape, nd)
        gemm(a, b, tmp, alpha=alpha_in, beta=beta_in, trans_a=trans_a, trans_b=trans_b, device=device, plan=plan)
        c[...] = tmp
        return c
    if a.dtype.kind not in "iu" and a.ndim == 2 and abs(alpha) > 1.0:  # (NaN: False)
        if alpha in (np.inf, -np.inf):
            return _alpha_once(a, b, c, alpha, beta, trans_a, trans_b, device, plan)
        # (the planner's own plans split no K of 64 or less; a plan= may name a K tile that does)
        if device != "cpu" and (a.shape[1 - trans_a] > _UNSPLIT_K or plan is not None):
            return _large_alpha(a, b, c, alpha, beta, alpha_in, beta_in, trans_a, trans_b, device, plan)
    try:
        return _gemm_arrays(a, b, c, alpha, beta, alpha_in, beta_in, trans_a, trans_b, device, plan)
    except ScaledOnce:  # (the CPU's core checked a float product whose plan splits K: c is as it was)
        return _alpha_once(a, b, c, alpha, beta, trans_a, trans_b, device, plan)


_UNSPLIT_K = 64  # K the planner's plans never split (the smallest split seen: K 256 in K tiles of 128)


def _gemm_arrays(a, b, c, alpha, beta, alpha_in, beta_in, trans_a, trans_b, device, plan):
    """gemm of a NumPy a, b a NumPy array or a PackedMatrix, c None or a native NumPy array
    (checked here), alpha and beta checked scalars (alpha_in / beta_in as given)."""
    if isinstance(b, PackedMatrix):
        get(device).check_prepacked("gemm")
        if trans_b:
            raise ValueError("gemm: a prepacked b is packed as given; trans_b must be False")
        opa = a.T if trans_a else a
        if c is not None and not isinstance(c, np.ndarray):
            raise TypeError(f"c must be a NumPy array, got {type(c).__name__}")
        types, dtype = gemm_types(a.dtype, b.dtype, None if c is None else c.dtype)
        if types[0] in ("i8", "u8"):
            alpha, beta = int_scalar(alpha_in, "alpha"), int_scalar(beta_in, "beta")
        if opa.ndim != 2:
            raise ValueError(f"gemm: a must be 2-D, got {a.ndim}-D with shape {a.shape}")
        shape = (opa.shape[0], b.shape[1])
        if c is None:
            c, beta = np.empty(shape, dtype), 0.0
        elif c.shape != shape:
            raise ValueError(f"gemm: c has shape {c.shape} but op(a) @ b has shape {shape}")
        elif not c.flags.writeable:
            raise ValueError(f"gemm: c ({c.dtype} {c.shape}) is read-only; pass a writeable array")
        _run_prepacked(opa, b, c, alpha, beta, plan)
        return c
    b = native_order(as_array(b, "b"))
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise ValueError(f"gemm: {name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
    types, dtype = gemm_types(a.dtype, b.dtype, None if c is None or not isinstance(c, np.ndarray) else c.dtype)
    if types[2] == "i32" and not (float(alpha).is_integer() and float(beta).is_integer()):
        raise ValueError(f"gemm: integer GEMM takes integer alpha and beta, got alpha={alpha}, beta={beta}")
    if types[0] in ("i8", "u8"):
        alpha, beta = int_scalar(alpha_in, "alpha"), int_scalar(beta_in, "beta")
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
        if c.shape != shape:
            raise ValueError(f"gemm: c has shape {c.shape} but op(a) @ op(b) has shape {shape}")
        if not c.flags.writeable:
            raise ValueError(f"gemm: c ({c.dtype} {c.shape}) is read-only; pass a writeable array")
    return get(device).gemm(opa, opb, c, alpha, beta, types, plan)


def _large_alpha(a, b, c, alpha, beta, alpha_in, beta_in, trans_a, trans_b, device, plan):
    """gemm of a float product with a finite |alpha| > 1 on a device other than the CPU (the CPU's
    core checks its own plans' split K, alpha and beta: ScaledOnce, session 29): the kernels scale the parts of a split K
    (plan ksplit, the tile walk's blocks of 2048 K, the packed nest's K blocks) by alpha before
    adding them, so parts whose scaled values overflow where alpha * their sum does not gave NaN
    or an infinity (alpha 1e33, parts of +-4e7 summing to 4096: NaN where NumPy's alpha * (a @ b)
    is 4.1e36; session 28). The product as the kernels compute it; where it holds a value that
    is not finite, c's values before are put back and the product is computed again as the sum
    with alpha 1, scaled once (_alpha_once). The check reads C once (and C is copied first when
    beta is not 0): a pass over M x N beside the product's 2 M N K operations, taken only where K
    may be split (K > 64, or a plan= given)."""
    c0 = c.copy() if isinstance(c, np.ndarray) and beta != 0.0 else None
    r = _gemm_arrays(a, b, c, alpha, beta, alpha_in, beta_in, trans_a, trans_b, device, plan)
    if np.isfinite(r).all():
        return r
    if c is None:
        c, beta = r, 0.0  # (its memory again; beta 0: not read)
    elif c0 is not None:
        c[...] = c0
    return _alpha_once(a, b, c, alpha, beta, trans_a, trans_b, device, plan)


def _alpha_once(a, b, c, alpha, beta, trans_a, trans_b, device, plan):
    """gemm of a float product with alpha applied once: the sum a @ b with alpha 1 into a float32 /
    float64 array, then alpha * sum + beta * c. The kernels scale the parts of a split K (plan
    ksplit, the tile walk's blocks of 2048 K added into C) before adding them, so alpha = +-inf
    gave NaN for a part summing to 0 or parts of opposite signs where NumPy's alpha * (a @ b) is an
    infinity (session 27), and a large finite alpha overflowed the scaled parts (_large_alpha)."""
    if not isinstance(b, PackedMatrix):
        b = native_order(as_array(b, "b"))
    wide = np.float64 if a.dtype == np.float64 else np.float32
    if a.shape[1 - trans_a] != b.shape[trans_b]:  # (the product's own call names the shapes)
        return gemm(a, b, c, alpha=1.0, trans_a=trans_a, trans_b=trans_b, device=device, plan=plan)
    total = gemm(a, b, np.empty((a.shape[trans_a], b.shape[1 - trans_b]), wide), trans_a=trans_a, trans_b=trans_b,
                 device=device, plan=plan)
    _, dtype = gemm_types(a.dtype, b.dtype, None if c is None else c.dtype)  # (c's dtype refused as gemm does)
    if c is None:
        c = np.empty(total.shape, dtype)
    elif c.shape != total.shape:
        raise ValueError(f"gemm: c has shape {c.shape} but op(a) @ op(b) has shape {total.shape}")
    elif not c.flags.writeable:
        raise ValueError(f"gemm: c ({c.dtype} {c.shape}) is read-only; pass a writeable array")
    with np.errstate(all="ignore"):  # (inf * 0 is NaN, as in NumPy)
        res = alpha * total.astype(np.float64)
        if beta != 0.0:  # (beta 0: c is not read)
            res += beta * c.astype(np.float64)
        c[...] = res.astype(c.dtype)
    return c


def _batched(a, b, out, plan, types, device="cpu"):
    """out[...] = a @ b over broadcast batch dims, as one kernel launch (at most 2 batch levels)."""
    batch = out.shape[:-2]
    dev = get(device)
    a, b = dev.resident(a), dev.resident(b)  # device copies first, then zero-stride broadcasts of them
    A = np.broadcast_to(a, batch + a.shape[-2:])
    B = np.broadcast_to(b, batch + b.shape[-2:])
    if out.size == 0:
        return
    C = out
    if overlaps(out, a, b) or kernel_readable(out) is not out:
        C = np.empty(out.shape, native_dtype(out.dtype))
    A, B = kernel_readable(A), kernel_readable(B)
    dims = _collapse_batch([A, B, C], batch)
    if len(dims) > 2:  # batch dims no stride pattern can merge: make the operands contiguous
        A, B = contiguous(A), contiguous(B)
        if C is out:
            C = np.empty(out.shape, native_dtype(out.dtype))
        dims = _collapse_batch([A, B, C], batch)
    views = []
    for j, x in enumerate((A, B, C)):
        shape = tuple(n for n, _ in dims) + x.shape[-2:]
        strides = tuple(st[j] for _, st in dims) + x.strides[-2:]
        # as_strided goes through the array interface, whose type string some ml_dtypes types
        # ('<f1' of float8_e5m2) do not survive: stride the bytes as unsigned ints, view back.
        raw = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        views.append(np.lib.stride_tricks.as_strided(raw, shape, strides, writeable=x is C).view(x.dtype))
    dev.gemm_views(views[0], views[1], views[2], types, plan)
    if C is not out:
        out[...] = C


def cross_compile(a: ArrayLike, b: ArrayLike, *, cpu: str, plan: dict | None = None, threads: int = 1,
                  code: bool = True) -> dict:
    """The kernel coopjit would build for a @ b (2-D operands; their dtypes, shapes and strides)
    on another x86 CPU, named as LLVM names it ("sapphirerapids", "graniterapids", "znver4",
    ...): {"config": the plan, "key", "ir": kernel IR, "llvm": optimized LLVM IR, "asm": its
    assembly}. Nothing is linked or run: this is how code paths for CPUs that are not here
    (AMX tiles on Intel Xeons) are read and checked. code=False stops after the kernel IR (no
    "llvm" or "asm"): the plan alone, in milliseconds rather than the code generator's second."""
    a = as_array(a, "a")
    b = as_array(b, "b")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"cross_compile: a and b must be 2-D, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"cross_compile: a has shape {a.shape} and b has shape {b.shape}: inner dimensions differ")
    if not isinstance(cpu, str):
        raise TypeError(f"cross_compile: cpu must be a CPU name (str), got {cpu!r}")
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"cross_compile: threads must be an int in [1, 1024], got {threads!r}")
    if not 1 <= threads <= 1024:
        raise ValueError(f"cross_compile: threads must be an int in [1, 1024], got {threads!r}")
    if not isinstance(code, (bool, np.bool_)):
        raise TypeError(f"cross_compile: code must be True or False, got {code!r}")
    types, dtype = gemm_types(a.dtype, b.dtype, None)
    c = np.empty((a.shape[0], b.shape[1]), dtype)
    out = _core.cross_compile(kernel_readable(a), kernel_readable(b), c, _overrides(plan), types, cpu, int(threads),
                              bool(code))
    out["config"] = from_core(out["config"], "cpu")
    return out


def matmul(a: ArrayLike, b: ArrayLike | PackedMatrix, *, out: np.ndarray | None = None, device: str | None = None,
           plan: dict | None = None, bias: ArrayLike | None = None, bias_axis: int = 1, activation: str | None = None,
           residual: ArrayLike | None = None, scale: ArrayLike | None = None, row_scale: ArrayLike | None = None,
           epilogue: Callable | None = None, out_dtype: DTypeLike | None = None) -> np.ndarray | np.generic:
    """a @ b with numpy.matmul semantics: 1-D operands are promoted and their dim removed, N-D
    operands are stacks of matrices broadcast over the leading dims, computed in one kernel launch.

    Accepts float32, float64, float16, bfloat16 and float8 (ml_dtypes) operands of one dtype, int8 /
    uint8 pairs (int32 result), and mixed pairs whose NumPy promotion is float32 or float64 (they
    are converted first, as numpy.matmul computes them); big-endian operands through a native
    copy. Inputs may be NumPy arrays, PyTorch CPU tensors, DLPack or buffer-protocol objects or
    array-likes. `out` may be any writable array of those kinds (the object is returned) whose
    dtype the result casts to under NumPy's 'same_kind' rule. Returns a NumPy array (or a NumPy
    scalar for 1-D @ 1-D). `plan`: a dict of plan fields or a kernel's .config (see coopjit.Plan).
    coopjit does not register itself as a backend of numpy.matmul: NumPy dispatches
    (__array_function__) on the arguments' types, and coopjit owns none of them.

    CUDA device arrays (torch CUDA tensors, CuPy arrays, objects with __cuda_array_interface__,
    coopjit.DeviceArray; 2-D or stacks) are read and written on their GPU without copies, and the
    result is a device array of the inputs' framework (see coopjit.DeviceArray); when every operand
    is one, the product is queued on their stream (torch's current stream) without waiting.

    Fused epilogue (CPU and devices), applied in the kernel before the result is written once, in this order:
    ``y = (a @ b) * scale[n] * row_scale[m] + bias``, ``y = activation(y)``, ``y += residual``,
    ``y = epilogue(builder, m, n, y)``, then the conversion to `out_dtype`. `bias`: N values (one
    per column; `bias_axis=0`: M values, one per row); `activation`: "relu", "gelu" (erf form),
    "gelu_tanh", "silu", "sigmoid", "tanh"; `residual`: an array that broadcasts to the result;
    `scale` / `row_scale`: N / M values (an int8 product's dequantization scales); `epilogue`: a
    function (builder, row, col, value) -> value built from KernelBuilder operations, as
    KernelBuilder.per_element takes; `out_dtype`: float32, bfloat16, float16 (float64 for a
    float64 product). Computed in float32 (float64 for float64 operands); an int8 product with an
    epilogue returns float32 unless out_dtype says otherwise."""
    if out_dtype is not None:  # ('bfloat16' / 'bf16' / torch.bfloat16 as well as NumPy's forms)
        out_dtype = as_dtype(out_dtype, "matmul: out_dtype")
    plain = (bias is None and activation is None and residual is None and scale is None and row_scale is None
             and epilogue is None and out_dtype is None)
    if plain and device is None:
        # the per-call fast path (None when it does not apply); plan= of NumPy operands checked and
        # converted first (a device's plan fields are its own: CUDA tensors' path below)
        if plan is None:
            c = _core.matmul_fast(a, b, out)
        elif type(a) is np.ndarray and type(b) is np.ndarray:
            c = _core.matmul_fast(a, b, out, _overrides(plan))
        else:
            c = None
        if c is not None:
            return c
        if type(a) is not np.ndarray:
            c = _cuda_fast.matmul(a, b, out, _gemm_fused._device_product, plan)  # torch CUDA tensors' fast path
            if c is not None:
                return c
    elif type(a) is not np.ndarray and device is None and epilogue is None:
        # torch CUDA tensors with an epilogue of torch CUDA tensors: the fast path too
        c = _cuda_fast.matmul_fused(a, b, out, bias, bias_axis, activation, residual, scale, row_scale, out_dtype,
                                    _gemm_fused._device_product, plan)
        if c is not None:
            return c
    fused_kw = {"bias": bias, "activation": activation, "residual": residual, "scale": scale, "row_scale": row_scale,
                "epilogue": epilogue, "out_dtype": out_dtype}
    if isinstance(out, np.ndarray) and out.flags.writeable:  # (the fast path above takes C-contiguous outputs only)
        check_own_elements(out, "out", "matmul")
    if type(a) is not np.ndarray or type(b) is not np.ndarray or (out is not None and type(out) is not np.ndarray):
        if any(_cuda_arrays.is_device_array(x) for x in (a, b, out) if x is not None):
            fused_kw["bias_axis"] = bias_axis
            return _gemm_fused._device_product("matmul", a, b, out, 1.0, 0.0, False, False, device, plan, fused_kw)
    if isinstance(a, PackedMatrix):  # (it read as a 0-d object array: "a has dtype object")
        raise TypeError(f"matmul: {_PACKED_ON_THE_LEFT}")
    if not plain and requested(fused_kw):
        fused_kw["bias_axis"] = bias_axis
        return _gemm_fused._matmul_fused(a, b, out, check_device(device), plan, fused_kw, isinstance(b, PackedMatrix))
    device = check_device(device)
    if out is not None and type(out) is not np.ndarray:
        # A PyTorch tensor, DLPack or buffer object (or an ndarray subclass): the product goes into
        # its memory through an ndarray view of it, and the object itself is returned.
        matmul(a, b, out=as_array(out, "out", writable=True), device=device, plan=plan)
        return out
    if out is not None and not out.dtype.isnative:
        # A big-endian (non-native) out: computed into a native array, swapped back into out.
        if not out.flags.writeable:
            raise ValueError(f"matmul: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
        tmp = np.empty(out.shape, native_dtype(out.dtype))
        matmul(a, b, out=tmp, device=device, plan=plan)
        out[...] = tmp
        return out
    if isinstance(b, PackedMatrix):
        get(device).check_prepacked("matmul")
        a = native_order(as_array(a, "a"))
        _, dtype = gemm_types(a.dtype, b.dtype, None if out is None else out.dtype)
        if a.ndim != 2 or a.shape[1] != b.shape[0]:
            raise ValueError(f"matmul: a has shape {a.shape} but the packed b is {b.shape}: inner dimensions "
                             f"differ (a must be 2-D with {b.shape[0]} columns)")
        shape = (a.shape[0], b.shape[1])
        if out is None:
            out = np.empty(shape, dtype)
        elif out.shape != shape:
            raise ValueError(f"matmul: out has shape {out.shape} but a @ b has shape {shape}")
        elif not out.flags.writeable:
            raise ValueError(f"matmul: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
        _run_prepacked(a, b, out, 1.0, 0.0, plan)
        return out
    a = native_order(as_array(a, "a"))
    b = native_order(as_array(b, "b"))
    a, b = promote(a, b)
    if out is not None:
        _, default = gemm_types(a.dtype, b.dtype)
        try:
            gemm_types(a.dtype, b.dtype, out.dtype)
        except TypeError:
            # numpy.matmul's out= rule: the result cast to out's type when that is a 'same_kind' cast
            # (float32 into float64, int32 into int64); computed in the product's type, then cast.
            if not np.can_cast(default, out.dtype, "same_kind"):
                raise TypeError(f"matmul: out has dtype {out.dtype}, but a {a.dtype} x {b.dtype} product is {default} "
                                f"and cannot be cast to it (numpy.matmul's 'same_kind' rule)") from None
            if not out.flags.writeable:
                raise ValueError(f"matmul: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
            tmp = matmul(a, b, device=device, plan=plan)
            if np.shape(tmp) != out.shape:
                raise ValueError(f"matmul: out has shape {out.shape} but a @ b has shape {np.shape(tmp)}") from None
            out[...] = tmp
            return out
    types, dtype = gemm_types(a.dtype, b.dtype, out.dtype if isinstance(out, np.ndarray) else None)
    for name, x in (("a", a), ("b", b)):
        if x.ndim == 0:
            raise ValueError(f"matmul: {name} is 0-d (a scalar: {x[()]!r}); matmul needs operands of 1 or more dims")
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
    scalar = out is None and result_shape == ()  # 1-D @ 1-D: numpy.matmul returns a NumPy scalar
    if out is None:
        out = np.empty(result_shape, dtype)
    else:
        if out.shape != result_shape:
            raise ValueError(f"matmul: out has shape {out.shape} but a @ b has shape {result_shape}")
        if not out.flags.writeable:
            raise ValueError(f"matmul: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
    # The result with the dims of 1-D operands put back: always a view of out.
    out_full = out
    if a.ndim == 1:
        out_full = np.expand_dims(out_full, -2 if b.ndim >= 2 else -1)
    if b.ndim == 1:
        out_full = np.expand_dims(out_full, -1)
    if batch:
        _batched(a2, b2, out_full, plan, types, device)
    else:
        get(device).gemm(a2, b2, out_full, 1.0, 0.0, types, plan)
    return out[()] if scalar else out


def compile_gemm(m: int, n: int, k: int, dtype: DTypeLike = np.float32, *, trans_a: bool = False,
                 trans_b: bool = False, accumulate: bool = False, device: str | None = None,
                 plan: dict | None = None, out_dtype: DTypeLike | None = None, bias: ArrayLike | bool | None = None,
                 bias_axis: int = 1, activation: str | None = None, residual: ArrayLike | bool | None = None,
                 scale: ArrayLike | bool | None = None, row_scale: ArrayLike | bool | None = None,
                 epilogue: Callable | None = None) -> Kernel:
    """Compiles (or fetches from the cache) the GEMM kernel for one problem.

    The kernel computes c = alpha * op(a) @ op(b) (+ beta * c when `accumulate`) for a of shape
    (m, k) ((k, m) when trans_a), b of shape (k, n) ((n, k) when trans_b), planned for
    C-contiguous arrays (operands in other layouts, NumPy or CUDA device arrays such as x.t() or
    x[:, ::2], go through C-ordered copies; c is written back), for the dtypes gemm takes
    (`out_dtype`: float32 out for 16-bit inputs).
    Calls: kernel(a, b) (a new C), kernel(a, b, c) (written in place), alpha=, and beta= with c
    when `accumulate` (beta without c, or without accumulate, is a ValueError naming it).
    `plan` (a dict, or another kernel's .config) overrides plan fields (below).

    A fused epilogue as matmul's (activation=, epilogue=, out_dtype= fixed here): bias=, scale=,
    row_scale=, residual= are either arrays, used by every call, or True: the kernel then takes
    them as keyword arguments of each call (kernel(a, b, bias=..., residual=...)). The kernel
    keeps a copy of each array given here, made now (CUDA device arrays by their framework: torch
    .clone(), CuPy .copy()): changing the array later does not change the kernel's results; to
    change them, pass the new array at a call, or compile with True and pass one at every call.
    """
    device = check_device(device)
    dtype = as_dtype(dtype, "compile_gemm: dtype")
    out_dtype = None if out_dtype is None else as_dtype(out_dtype, "compile_gemm: out_dtype")
    steps = {"bias": bias, "activation": activation, "residual": residual, "scale": scale, "row_scale": row_scale,
             "epilogue": epilogue}
    for name, v in (("m", m), ("n", n), ("k", k)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"compile_gemm: {name} must be a non-negative int, got {v!r} ({type(v).__name__})")
        if v < 0 or v >= 2**62:
            raise ValueError(f"compile_gemm: {name} must be a non-negative int, got {v!r} (at most 2^62 - 1)")
    fused = None
    try:
        # (in the machine's byte order: a kernel compiled for '>f4' refused every call, native or
        # big-endian: "a has dtype float32; this kernel was compiled for >f4")
        dtype = native_dtype(dtype)
        gemm_types(dtype, dtype, None if requested(steps) else out_dtype)
    except TypeError as e:  # what the core said, about this function's arguments
        raise TypeError(f"compile_gemm: dtype={dtype!r}, out_dtype={out_dtype!r} is not supported ({e})") from None
    if requested(steps):
        fused = Epilogue("compile_gemm", dtype, dtype, int(m), int(n), bias_axis=bias_axis, out_dtype=out_dtype,
                         keep=True, **steps)
        if accumulate and dtype.name in ("int8", "uint8"):
            raise ValueError("compile_gemm: an int8 product with an epilogue does not take accumulate=True; add c "
                             "through residual=")
    return get(device).compile_gemm(int(m), int(n), int(k), dtype, bool(trans_a), bool(trans_b), bool(accumulate), plan,
                                    out_dtype, fused)


#: Every field plan= takes (the CPU's; then the devices'), appended to the docstrings that take a plan.
PLAN_HELP = """Plan fields (plan={...} or a kernel's .config; every field optional, the planner fills the rest):
  CPU: layout 'row' | 'col'; simd_width (vector lanes: the CPU's full width, or half of it on
  AVX-512, e.g. 8 f32 lanes, which the planner takes for narrow N on Zen 4); mr, nr (register tile
  rows / columns; nr a multiple of simd_width); kb (K step of one mul_add, a power of two 4..128); kt (K elements per K tile); threads
  (workers); split 'dp' | 'sk' | 'sk+dp' (Stream-K, seeds/004); pack (bool: A and B copied into
  tile panels); prepacked_b (bool: B from coopjit.prepack); vnni 1 | 2 | 4 (K pairs / quads for the
  dot instructions); amx 'no' | 'yes' | 'emulated' (AMX tiles); amx_feed 0 | 1 | 2 (AMX: tile loads
  before the dot products, between them, or between them with B panels in 1 KiB tiles); amx_prefetch 0..6 (AMX: none, A's panel
  lines two K steps ahead, A's and B's; 3 / 4: 1 and A's and B's lines 8 / 16 steps ahead into
  L2; 5: A's and B's 8 steps ahead into L2 only; 6: 1 and the next micro kernels' cold panels into L2); amx_store (bool, AMX: a full tile goes from the
  tiles straight to C when alpha is 1, without a fused epilogue or beta; default on); demote (bool: packed panels pushed to the shared L3 as
  they are written, CLDEMOTE); cycles (bool, packed plans, debugging: the kernel adds the
  time-stamp counter's ticks of its phases to per-worker counters that
  coopjit._core._gemm_cycles() returns); c_prefetch (bool, AMX: the lines a tile will write, C's
  or its partial sums', prefetched for writing during its K loop); direct_a (bool, AMX: the tiles read a row-major A where it is,
  unpacked; K a multiple of kb, M of mr); inline_b (bool: no packing phase for B, each worker
  packs the K-tile slice of each of its column panels just before its tiles read it); own_a (bool:
  one row of workers, each packing its own copy of A, so that no worker reads panels another core
  wrote and no packing barrier holds the workers together; the default for bf16 on 2-4 workers
  under 8 cores up to 1024^3); k_inner (bool:
  the packed nest takes each block of row panels through every K tile before the next block, so the
  block's partial sums stay in L2; AMX: each tile's partial sums one contiguous 4 KiB block);
  b_prefetch (bytes, a multiple of 64 up to 8192: the unpacked k_outer walk prefetches each tile's
  rows of B that far ahead, the dot walk of matrix-vector products each tile's rows of A; 0 none);
  mc_tiles (row panels per block of the packed nest); nc_tiles (packed nest, AMX tiles too: for
  each K tile, blocks of that many column panels, each row panel across a block; 0: blocks of
  mc_tiles row panels); fixed (bool: sizes and strides built into the code); order 'm_inner' |
  'k_outer' | 'dot' (the tile walk); grid_m (workers along M in the blocked nest; 0: at run time);
  shares (packed plans: the blocked nest in threads x shares shares, handed out after a packing
  launch; a thread with none left takes a slower thread's next one; 1: one a worker; the dot walk
  likewise, its row blocks).
  ksplit (the k_outer walk: K split into that many parts, each over all of C (one row, or a small
  M x N block of few tiles for the workers), their partial sums added into C, a fused epilogue applied once after the
  sum; more parts than threads run as shares on the plan's threads; 0: none; named without order,
  it takes the k_outer walk of an unpacked plan).
  Devices (opencl:N, level_zero:N, cuda:N): layout; subgroup_size; mr, nr, kb (a subgroup's tile
  and K step); sg_m, sg_n (subgroups per work-group); dpas, block2d, mma 'no' | 'yes' |
  'emulated' (Intel DPAS / 2-D block I/O, NVIDIA mma.sync); stages (NVIDIA cp.async pipeline
  stages; 0: none); wgmma 'no' | 'yes' (Hopper sm_90: the warpgroup pipeline, default where it
  applies); tma 'no' | 'yes' (its panels through the Tensor Memory Accelerator, default with
  wgmma on unbatched products); ws 'no' | 'yes' | 2 (warp specialization of TMA plans: a
  producer warp, 2: a producer warpgroup with setmaxnreg, and wgmma consumer warpgroups; one tile
  a block; default 2 on 128-row data-parallel TMA plans, int8: 2 with two consumer warpgroups,
  'yes' with one); kmajor 'no' | 'yes' (int8 operands
  contiguous along M or N copied K-major first, for 8-bit wgmma; default where it applies);
  epi_smem 'no' | 'yes' (wgmma plans: the epilogue staged through shared memory, C written in
  16-byte chunks; default yes); epi_alias 'no' | 'yes' (ws data-parallel plans of one tile a
  block: that staging in the pipeline's stage slots after a barrier of the consumer warps, so
  that the slots can be one more; default yes on 128 x 320 blocks, which then take 4 stages);
  tma_store 'no' | 'yes' | 2 (wgmma TMA plans of one product, alpha /
  beta epilogues, C of bf16 / f16 / f32 / int32: C written from the staging by TMA stores, edge
  tiles clipped by the copy engine; 2: 16-bit C with contiguous rows in boxes of a warpgroup; C not
  16-byte aligned runs without them; default 2); persistent 'no' | 'yes' (ws plans: a grid of min(tiles, SMs)
  blocks walking the tiles; default no, but yes on int8 ws plans of more than a wave); sk_flags 'no' | 'yes' (ws Stream-K plans: the split
  tiles' parts added inside the kernel after release / acquire flags, where the persistent grid
  fits the SMs; default 'yes' where every worker's part is a tile or more, else 'no': a second,
  fix-up launch); sk_down 'no' | 'yes' (ws Stream-K plans: each Stream-K part's K tiles from its
  last down to its first; default 'no'); sk_stage 'no' | 'yes' (sk_flags plans: the successor's partial
  read through the pipeline's stage slots by cp.async; default 'yes' where it fits them); sk_stage_store
  'no' | 'yes' (sk_flags plans: the partial a part leaves for its predecessor written through the stage
  slots, stored by the producer with cp.async.bulk; 2: a bulk group a slot; default 'no': measured no
  faster); sk_one_release
  'no' | 'yes' (sk_flags plans: each flag set by one work-item a warp; default 'yes'); sk_pair 'no' | 'yes'
  (sk_stage plans whose workers each take a tile or more: blocks in clusters of 2, the tile a pair shares
  passed through distributed shared memory, not the workspace; default 'no'); sk_prefetch
  'no' | 'yes' (sk_flags plans: the successor's partial prefetched into L2; default 'no'); sk_trace
  'no' | 'yes' (debug: the consumers' clock at each unit's boundaries, _core.gpu_stream_k_flags reads
  it; default 'no'); cluster 'no' | 2 (ws DP plans whose tiles along M are even:
  pairs of blocks at the same N, each copying half of B's panel, multicast by TMA to both; default
  'no'); group_m (0: tiles walk down M; g: in bands of g M tiles; default 16 on persistent 16-bit
  128 x 256 DP plans whose A is over 50 MB, else 0); split, kt, workers (Stream-K)."""
for _f in (matmul, gemm, compile_gemm):
    _f.__doc__ = _f.__doc__.rstrip() + "\n\n    " + PLAN_HELP.replace("\n", "\n    ")
