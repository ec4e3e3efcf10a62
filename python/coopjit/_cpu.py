"""The CPU behind the device interface (_device.Device): GEMM kernels JIT-compiled through the ORC
JIT and run on the worker pool (the core's gemm / compile_gemm), reductions, and KernelBuilder
kernels compiled for the host."""
from __future__ import annotations

import logging

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from . import _core
from ._arrays import as_array, check_scalar, kernel_readable, native_dtype, overlaps, row_major
from ._cuda_arrays import CudaView
from ._device import Device
from ._display import KernelDisplay
from ._epilogue import Epilogue
from ._kernel_args import _overrides, check_beta, check_kernel_call, kernel_types
from ._log import logger
from ._plan import Plan, from_core


class CpuDevice(Device):
    """"cpu": kernels JIT-compiled for the host and run on its worker pool, on host memory."""

    kind = "cpu"
    plan_target = "cpu"
    sources = ("ir", "llvm", "asm")

    @classmethod
    def names(cls, prefix: str) -> list[str]:
        return ["cpu"]

    def info(self) -> dict:
        cpu = _core.cpu_info()
        return {"name": "cpu", "backend": "cpu", "device_name": cpu["name"], "type": "cpu",
                "triple": cpu["triple"], "vector_bytes": cpu["vector_bytes"]}

    def empty(self, shape, dtype: np.dtype, order: str) -> np.ndarray:
        return np.empty(shape, dtype, order=order)

    def plan_overrides(self, plan) -> dict:
        return _overrides(plan)

    def check_prepacked(self, where: str) -> None:
        return None

    def compile_gemm(self, m, n, k, dtype, trans_a, trans_b, accumulate, plan, out_dtype, fused=None):
        return Kernel(m, n, k, dtype, trans_a, trans_b, accumulate, plan, out_dtype, fused)

    def compile_kernel(self, fn):
        fn.compile()
        return CustomKernel(fn)

    def gemm(self, a, b, c, alpha, beta, types, plan, fused=None):
        if fused is None:
            _run(a, b, c, alpha, beta, plan, types, check_scaled=True)
        else:
            _run_fused(a, b, c, alpha, beta, _overrides(plan), types, fused)
        return c

    def gemm_views(self, a, b, c, types, plan, fused=None, operands=None) -> None:
        if fused is None:
            _core.gemm(a, b, c, 1.0, 0.0, _overrides(plan), types)
        else:
            _core.gemm(a, b, c, 1.0, 0.0, _overrides(plan), types, None, operands)

    def epilogue_operands(self, fused, operands: dict) -> dict:
        return _host_operands(fused, operands)

    def reduce2d(self, op, form, x2d, y, types) -> None:
        src, acc, out = types
        _core.reduce2d(op, form, x2d, y, src, acc, out)

    def pool_workers(self) -> int:
        return _core.get_num_threads()


class ScaledOnce(Exception):
    """_run with check_scaled: the kernels' scaled parts of a split K overflowed (a float product
    with |alpha| or |beta| > 1; the core checked C and put its values back, c2 is as it was); the
    caller applies alpha and beta once (coopjit._gemm._alpha_once)."""


def _run(a2, b2, c2, alpha, beta, plan, types, check_scaled=False):
    """c2 = alpha * a2 @ b2 + beta * c2 for 2-D operands already checked; handles aliasing.
    check_scaled: ScaledOnce raised where the core found the scaled parts overflowed."""
    a2 = kernel_readable(a2)
    b2 = kernel_readable(b2)
    target = c2
    if overlaps(c2, a2, b2) or kernel_readable(c2) is not c2:  # a native, aligned, apart copy
        nd = native_dtype(c2.dtype)
        target = np.array(c2, dtype=nd) if beta != 0.0 else np.empty(c2.shape, nd)
    if target.size:
        if _core.gemm(a2, b2, target, alpha, beta, _overrides(plan), types, None, None, check_scaled):  # (positional: cheaper)
            raise ScaledOnce
    if target is not c2:
        c2[...] = target


def _host_operands(ep: Epilogue, d: dict) -> dict:
    """d, when none of the epilogue's operands is a CUDA device array (a product on the CPU reads
    them from host memory); TypeError naming the one that is."""
    for name, v in d.items():
        if isinstance(v, CudaView):
            raise TypeError(f"{ep.where}: {name} is a CUDA device array ({v.framework}, {v.device}), but the product "
                            f"runs on the CPU: pass a host array, or device arrays for the operands too")
    return d


def _run_fused(a2, b2, c2, alpha, beta, plan_fields, types, ep: Epilogue, prepacked=None, **given):
    """c2 = epilogue(alpha * a2 @ b2 (+ beta * c2)) for operands already checked (2-D, or 3-/4-D
    views with batch dims the kernel walks): through a C-contiguous target the residual can share
    strides with, copied back when c2 is not one."""
    a2 = kernel_readable(a2)
    b2 = kernel_readable(b2)
    target = c2
    if overlaps(c2, a2, b2) or kernel_readable(c2) is not c2 or not c2.flags.c_contiguous:
        nd = native_dtype(c2.dtype)
        target = np.array(c2, dtype=nd, order="C") if beta != 0.0 else np.empty(c2.shape, nd)
    if target.size:
        _core.gemm(a2, b2, target, alpha, beta, plan_fields, types, prepacked, _host_operands(ep, ep.core(target, **given)))
    if target is not c2:
        c2[...] = target


def _large(x) -> bool:
    """A number with |x| > 1 (inf included; NaN not): an alpha or beta that scales the parts of a
    split K past what their sum reaches."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and abs(x) > 1.0


class Kernel(KernelDisplay):
    """A compiled GEMM kernel for one problem: call it with arrays of that problem, repeatedly.

    `config` is the plan as a dict; `source("ir" | "llvm" | "asm")` the generated code; print
    it (or show it in Jupyter) for its plan.
    """

    def __init__(self, m: int, n: int, k: int, dtype: DTypeLike, trans_a: bool, trans_b: bool, accumulate: bool,
                 plan: dict | None, out_dtype: DTypeLike | None = None, fused: Epilogue | None = None) -> None:
        self.m, self.n, self.k = m, n, k
        self.dtype = dtype
        self._fused = fused
        self._types, self.out_dtype = kernel_types(dtype, out_dtype, fused)
        self.trans_a, self.trans_b, self.accumulate = trans_a, trans_b, accumulate
        # The strides the kernel is planned for: contiguous a, b and c (transposes as views).
        sa = (1, m) if trans_a else (k, 1)
        sb = (1, k) if trans_b else (n, 1)
        self._plan = plan
        self._core = _core.compile_gemm(list(self._types), m, n, k, [*sa, *sb, n, 1], accumulate, _overrides(plan),
                                        None if fused is None else fused.steps())
        # Whether the kernel adds parts of K each scaled by alpha (K tiles, 2048-K blocks, ksplit
        # parts): a large alpha's result is then checked (_large_alpha).
        cfg = self._core.config
        self._splits_k = k > min(int(cfg["kt"]), 2048) or int(cfg["ksplit"]) > 1
        # The per-call fast path (GemmKernel.call_fast): an untransposed product without an epilogue
        self._fast = None
        if fused is None and not trans_a and not trans_b:
            self._core.set_fast_dtypes(np.dtype(dtype), np.dtype(self.out_dtype))
            self._fast = self._core.call_fast
        if logger.isEnabledFor(logging.DEBUG):
            cfg = self.config
            logger.debug("gemm %s M=%d N=%d K=%d: %s %dx%d %s x%d%s, %s in %.1f ms", np.dtype(dtype).name, m, n, k,
                         cfg["layout"], cfg["mr"], cfg["nr"], cfg["split"], cfg["threads"], " packed" if cfg["pack"] else "",
                         self._core.origin, self._core.compile_seconds * 1e3)

    @property
    def config(self) -> Plan:
        """The plan as a value (a dict of typed fields, see coopjit.Plan) that plan= takes back:
        compile_gemm(..., plan=kernel.config) plans the same kernel."""
        return from_core(self._core.config, "cpu")

    def source(self, kind: str = "ir") -> str:
        """The kernel as kernel IR ("ir"), optimized LLVM IR ("llvm") or host assembly ("asm")."""
        return self._core.source(kind)

    def __call__(self, a: ArrayLike, b: ArrayLike, c: np.ndarray | None = None, *, alpha: float = 1.0,
                 beta: float = 0.0, bias: ArrayLike | None = None, residual: ArrayLike | None = None,
                 scale: ArrayLike | None = None, row_scale: ArrayLike | None = None) -> np.ndarray:
        """c = the kernel's product (and epilogue) of a and b; bias= / residual= / scale= /
        row_scale= give (or replace) the operands of epilogue steps the kernel was compiled with."""
        # The common call first (|alpha| <= 1, no operands: none of the cases below): the core's fast
        # path straight away, a Python frame and the scalar checks less (4x4x4 on the 2-core guest:
        # 1.7-1.85x matmul's time a call -> 1.3-1.4x).
        if (self._fast is not None and type(alpha) is float and -1.0 <= alpha <= 1.0 and bias is None
                and residual is None and scale is None and row_scale is None):
            r = self._fast(a, b, c, alpha, beta)
            if r is not None:
                return r
        # (an operand of an epilogue step this kernel lacks: refused by _call)
        if (self._fused is None and bias is None and residual is None and scale is None and row_scale is None
                and (_large(alpha) or (self._splits_k and _large(beta))) and np.dtype(self.dtype).kind not in "iu"):
            if _large(alpha) and alpha in (np.inf, -np.inf):
                return self._alpha_once(a, b, c, float(alpha), beta)
            if self._splits_k:
                return self._large_alpha(a, b, c, alpha, beta)
        return self._call(a, b, c, alpha, beta, bias, residual, scale, row_scale)

    def _call(self, a, b, c, alpha, beta, bias, residual, scale, row_scale):
        # The per-call fast path: arrays of the compiled problem, nothing to copy or check here
        # that the core does not check itself (strides, plan); None when anything is unusual.
        if self._fast is not None and bias is None and residual is None and scale is None and row_scale is None:
            r = self._fast(a, b, c, alpha, beta)
            if r is not None:
                return r
        given = {"bias": bias, "residual": residual, "scale": scale, "row_scale": row_scale}
        if self._fused is None and any(v is not None for v in given.values()):
            names = ", ".join(k for k, v in given.items() if v is not None)
            raise ValueError(f"this kernel was compiled without an epilogue; {names}= need compile_gemm(..., "
                             f"{names.split(',')[0]}=...)")
        # c as matmul's out= takes it: a PyTorch CPU tensor, DLPack or buffer object written in
        # place through an ndarray of its memory, and returned as given (it was refused with "c
        # must be a float32 array of shape (6, 4), got torch.float32 torch.Size([6, 4])").
        given_c = c
        if c is not None and not isinstance(c, np.ndarray):
            c = as_array(c, "c", writable=True)
        alpha_in = alpha
        a, b, c, alpha, beta = check_kernel_call(self, a, b, c, alpha, beta)
        if self._fused is not None and np.dtype(self.dtype).kind in "iu":
            # a float output: alpha in float, not the int32 sums times alpha (which wrap)
            alpha = self._fused.fold_alpha_call(check_scalar(alpha_in, "alpha"), given, self.k, np.dtype(self.dtype),
                                                np.dtype(self.dtype))
        if not c.flags.writeable:
            raise ValueError(f"c ({c.dtype} {c.shape}) is read-only; pass a writeable array")
        # The kernel's code is for C-contiguous arrays (as given, before the transposes): other
        # layouts (strided, sliced, Fortran-ordered) are copied to that one, where they would need
        # other code (the plan takes unit strides and row lengths as constants).
        a = a if row_major(a) else np.array(a, order="C")
        b = b if row_major(b) else np.array(b, order="C")
        # Misaligned data (a byte offset) is copied here, before the transposes, in the kernel's
        # C order: copied after them (kernel_readable of op(a)), a.T of M = 1 (or b.T of N = 1)
        # came out with other strides than the kernel's fixed ones, and the call was refused with
        # "these operands need another kernel" (session 24's audit).
        a, b = kernel_readable(a), kernel_readable(b)
        opa = a.T if self.trans_a else a
        opb = b.T if self.trans_b else b
        target = c
        # A native, aligned, C-contiguous copy apart from the inputs
        if overlaps(c, a, b) or kernel_readable(c) is not c or not row_major(c):
            nd = native_dtype(c.dtype)
            target = np.array(c, dtype=nd, order="C") if beta != 0.0 else np.empty(c.shape, nd)
        if target.size:
            # (a CUDA device array among the operands: named, as matmul's; it reached the core as
            # an object array: "got 0-D with 1 elements", or an internal error for a residual)
            epi = None if self._fused is None else _host_operands(self._fused, self._fused.core(target, **given))
            self._core.run(kernel_readable(opa), kernel_readable(opb), target, alpha, beta, epi)
        if target is not c:
            c[...] = target
        return c if given_c is None or isinstance(given_c, np.ndarray) else given_c

    def _large_alpha(self, a, b, c, alpha, beta):
        """A call of a float kernel with a finite |alpha| > 1 or |beta| > 1, as gemm's (the core's check): the
        kernel's result, or where it holds a value that is not finite, c's values before put back
        and the product with alpha applied once (_alpha_once)."""
        c0 = None
        if c is not None and beta != 0.0:
            c0 = np.array(as_array(c, "c"), copy=True)
        r = self._call(a, b, c, alpha, beta, None, None, None, None)
        out = r if isinstance(r, np.ndarray) else as_array(r, "c", writable=True)
        if np.isfinite(out).all():
            return r
        if c is None:
            c, beta = r, 0.0  # (its memory again; beta 0: not read)
        elif c0 is not None:
            as_array(c, "c", writable=True)[...] = c0
        return self._alpha_once(c=c, a=a, b=b, alpha=float(alpha), beta=beta)

    def _alpha_once(self, a, b, c, alpha, beta):
        """A call with alpha applied once: the product with alpha 1 into c, then c = alpha * c + beta * c's
        values before (as gemm's: the K split's parts and the 2048-K blocks are scaled before they
        are added, which gave NaN for a part summing to 0 with alpha = +-inf, session 27, and
        overflowed the scaled parts with a large finite alpha, session 28)."""
        beta = check_scalar(beta, "beta")
        check_beta(self, c is not None, beta)
        c0 = None
        if beta != 0.0:
            c0 = as_array(c, "c").astype(np.float64)
        r = self(a, b, c, alpha=1.0)
        out = r if isinstance(r, np.ndarray) else as_array(r, "c", writable=True)
        with np.errstate(all="ignore"):  # (inf * 0 is NaN, as in NumPy)
            res = alpha * out.astype(np.float64)
            if c0 is not None:
                res += beta * c0
            out[...] = res.astype(out.dtype)
        return r

    def __repr__(self):
        cfg = self.config
        return (
            f"Kernel(gemm {self.dtype} M={self.m} N={self.n} K={self.k} trans_a={self.trans_a} "
            f"trans_b={self.trans_b} accumulate={self.accumulate}; plan layout={cfg['layout']} "
            f"tile={cfg['mr']}x{cfg['nr']} kb={cfg['kb']} simd={cfg['simd_width']})"
        )


class CustomKernel:
    """A compiled user kernel on the CPU: call it with its parameters in order (arrays for
    pointers). A kernel that reads work_id("group") / work_id("groups") runs on a launch grid:
    groups=G (required) work-groups, spread over the worker pool's threads (each work-group one
    invocation, a subgroup whose lanes are its vectors; subgroup is 0 and subgroups 1 there)."""

    def __init__(self, fn):
        self._fn = fn

    @property
    def reads_groups(self) -> bool:
        """Whether calls need groups= (the kernel reads work-group ids)."""
        return self._fn.reads_groups()

    def __call__(self, *args, groups: int | None = None):
        self._fn.run(*args, groups=groups)

    def source(self, kind: str = "ir") -> str:
        return self._fn.source(kind)

    def __repr__(self):
        first = self._fn.text().splitlines()[0]
        return f"CustomKernel({first.rstrip(' {')})"
