"""The SPIR-V runtimes and CUDA behind the device interface (_device.Device): GEMM, reductions and
user kernels on GPU devices ("opencl:N", "level_zero:N", "cuda:N"), and named GPUs that are not
here ("target:xe-hpc", "target:sm_90": code generated and checked, not run).

On SPIR-V devices the kernels read and write device-visible memory (USM shared / fine-grain SVM).
Arrays made by coopjit.empty(..., device=...) are used in place; other NumPy arrays are copied
into such memory for the call (inputs) and copied back after it (outputs), so NumPy arrays go in
and come back. On CUDA devices, whose memory the host cannot touch, each host array a kernel
reads is copied (the bytes its view spans, so its strides stay as they are) into device memory
for the launch, and those it writes are copied back after it (_Staging).
"""
from __future__ import annotations

import math

import numpy as np

from . import _core, _cuda_fast
from ._arrays import as_array, check_scalar, int_scalar, native_order, row_major
from ._cuda_arrays import (CudaView, byte_span, c_ordered, c_strides, copy_back, copy_in, device_view, launch_stream,
                           result_like, wait_for)
from ._device import Device
from ._kernel_args import _gpu_overrides, check_beta, check_kernel_call, kernel_types
from ._plan import from_core


class RuntimeDevice(Device):
    """A device of the C++ runtime (cpp/runtime/devices.h): memory from it, kernels lowered per
    work-item (SIMT) and launched on it. Names the Python layer does not know go to this class
    too, so that the runtime reports them (coopjit.empty / device_info with a bad name)."""

    kind = "runtime"
    sources = ("ir", "llvm", "spirv")
    default_source = "spirv"
    #: whether kernels launch here (a named target only generates them)
    launches = True

    @classmethod
    def names(cls, prefix: str) -> list[str]:
        return [name for backend, name in _listing() if backend == prefix]

    def info(self) -> dict:
        return _core.device_info(self.name)

    @property
    def host_visible(self) -> bool:
        """Whether the host reads this device's kernel memory directly (SPIR-V devices; not CUDA):
        asked of the runtime once (kept without a lock, which a fork() could leave held)."""
        v = self.__dict__.get("_host_visible")
        if v is None:
            v = self.__dict__["_host_visible"] = _core.device_info(self.name)["memory"] != "device"
        return v

    @host_visible.setter
    def host_visible(self, value: bool) -> None:  # tests take a SPIR-V device as one the host cannot touch
        self.__dict__["_host_visible"] = bool(value)

    def empty(self, shape, dtype: np.dtype, order: str) -> np.ndarray:
        """USM shared (or fine-grain SVM) memory on a SPIR-V device: the host and the device's
        kernels use it in place, without copies; freed after the array and its views."""
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise TypeError(f"coopjit.empty: dtype {dtype} holds Python objects; device memory holds plain values")
        shape = (shape,) if np.isscalar(shape) else tuple(shape)
        if any(int(s) < 0 for s in shape):
            raise ValueError(f"coopjit.empty: negative dimension in shape {shape}")
        nbytes = math.prod(int(s) for s in shape) * dtype.itemsize
        buf = _core.alloc_shared(self.name, nbytes)
        return np.ndarray(shape, dtype, buffer=buf, order=order)

    def resident(self, x):
        return to_device(x, self)

    def plan_overrides(self, plan) -> dict:
        return _gpu_overrides(plan)

    def compile_gemm(self, m, n, k, dtype, trans_a, trans_b, accumulate, plan, out_dtype, fused=None):
        return GpuKernel(m, n, k, dtype, trans_a, trans_b, accumulate, plan, out_dtype, self, fused)

    def compile_kernel(self, fn):
        program = fn.compile_device(self.name)
        check = fn.device_check(program.subgroup_size, program.work_group_size)
        return DeviceCustomKernel(program, self, check, fn.reads_groups())

    def compile_reduce(self, op, form, types, shape, strides):
        return _core.gpu_reduce_program(self.name, op, form, list(types), list(shape), list(strides))

    def gemm(self, a, b, c, alpha, beta, types, plan, fused=None):
        return gemm(a, b, c, alpha, beta, types, self, plan, fused)

    def gemm_views(self, a, b, c, types, plan, fused=None, operands=None) -> None:
        if fused is not None and operands and operands.get("residual") is not None:
            fused.bound["residual"] = operands["residual"]  # the launch lays it out like its (C-contiguous) output
        gemm(a, b, c, 1.0, 0.0, types, self, plan, fused=fused)

    def reduce2d(self, op, form, x2d, y, types) -> None:
        reduce2d(op, form, x2d, y, types, self)


class SpirvDevice(RuntimeDevice):
    """A SPIR-V device: kernels lowered to SPIR-V and built by the runtime's driver, memory the
    host and the device share."""

    kind = "spirv"


class OpenclDevice(SpirvDevice):
    """"opencl:N": an OpenCL device (Intel's CPU runtime from the intel-opencl-rt wheel, GPUs)."""

    runtime = "the OpenCL runtime"


class LevelZeroDevice(SpirvDevice):
    """"level_zero:N": an Intel GPU through the Level Zero loader."""

    runtime = "the Level Zero loader"


class CudaDevice(RuntimeDevice):
    """"cuda:N": an NVIDIA GPU through the CUDA driver: PTX modules, device memory the host
    reaches through copies (_Staging), CUDA device arrays read and written where they are."""

    kind = "cuda"
    sources = ("ir", "llvm", "ptx")
    default_source = "ptx"


class TargetDevice(RuntimeDevice):
    """"target:<name>": a GPU named, not present ("xe-hpc", "xe2", "generic" for SPIR-V; "sm_80",
    "sm_90" for PTX): kernels are generated and checked (spirv-val; PTX for ptxas), never run."""

    kind = "target"
    host_visible = True
    launches = False

    @classmethod
    def names(cls, prefix: str) -> list[str]:
        return []  # named targets are not devices coopjit.devices() lists

    @property
    def target(self) -> str:
        return self.name[len("target:"):]

    @property
    def sources(self) -> tuple:
        return ("ir", "llvm", "ptx") if self.target.startswith("sm_") else ("ir", "llvm", "spirv")

    @property
    def default_source(self) -> str:
        return self.sources[-1]


_LISTED: dict[str, list] = {}


def _listing() -> list[tuple[str, str]]:
    """(backend, name) of every usable GPU device, in coopjit.devices()'s order. The runtime
    discovers its devices once per process (cpp/runtime/devices.cpp), so the list is read once:
    device= is checked against it on every call."""
    out = _LISTED.get("devices")
    if out is None:
        out = _LISTED.setdefault("devices", [(d["backend"], d["name"]) for d in _core.gpu_devices()])
    return out


def shared_buffer(a) -> _core.SharedBuffer | None:
    """The shared allocation an array (or a view of it) lives in, or None for host memory."""
    while a is not None:
        if isinstance(a, _core.SharedBuffer):
            return a
        a = a.obj if isinstance(a, memoryview) else getattr(a, "base", None)
    return None


def _whole(x: np.ndarray) -> bool:
    return all(s % x.itemsize == 0 for s in x.strides)


def _byte_span(x: np.ndarray) -> tuple[int, int]:
    """[lo, hi): the host bytes the elements of view x lie in."""
    return byte_span(_address(x), x.shape, x.strides, x.itemsize)


class _Staging:
    """Device copies of host arrays for one launch on a device the host cannot touch (CUDA):
    address(x) copies the bytes x spans into device memory and gives the address of x's first
    element there (strides unchanged); finish() copies those written back. On host-visible
    devices address() is the array's own address."""

    def __init__(self, dev: RuntimeDevice):
        self.device = dev.name
        self.copies = not dev.host_visible
        self._keep, self._back = [], []

    def address(self, x: np.ndarray, write: bool = False) -> int:
        if isinstance(x, CudaView):  # device memory already: read and written where it is
            return x.ptr
        if not self.copies:
            return _address(x)
        if x.size == 0:
            return 0
        lo, hi = _byte_span(x)
        buf = _core.alloc_device(self.device, hi - lo)
        buf.upload(lo, hi - lo)  # outputs too: the bytes between a view's elements come back unchanged
        self._keep.append(buf)
        if write:
            self._back.append((buf, lo, hi - lo))
        return buf.address + (_address(x) - lo)

    def keep(self, x) -> None:
        """Holds x (and the memory it owns) until finish()."""
        self._keep.append(x)

    def finish(self):
        for buf, lo, n in self._back:
            buf.download(lo, n)
        self._keep, self._back = [], []


def _on_device(x: np.ndarray, dev: RuntimeDevice) -> bool:
    buf = shared_buffer(x)
    return buf is not None and buf.device == dev.name


def _address(x: np.ndarray) -> int:
    return x.__array_interface__["data"][0]


def to_device(x: np.ndarray, dev: RuntimeDevice) -> np.ndarray:
    """`x` itself when it lives in `device`'s shared memory with whole-element strides, else a
    copy there (C order). On devices the host cannot touch (CUDA): x itself in host memory (copied
    at launch by _Staging), or a C-order copy when its strides are not whole elements."""
    if isinstance(x, CudaView):
        if x.device != dev.name:
            raise ValueError(f"a device array on {x.device} cannot be an operand of a kernel on {dev.name}")
        if not _whole(x):
            raise ValueError(f"a device array with byte strides {x.strides} that are not whole {x.dtype} elements")
        return x
    if not dev.host_visible:
        if x.size == 0:  # NumPy's empty arrays may have strides 0: the C-order ones the kernel was planned for
            return np.lib.stride_tricks.as_strided(x, x.shape, c_strides(x.shape, x.itemsize))
        return x if _whole(x) else np.ascontiguousarray(x)
    if _on_device(x, dev) and _whole(x):
        return x
    d = dev.empty(x.shape, x.dtype, "C")
    if x.size:
        d[...] = x
    return d


class _Output:
    """The array a kernel writes: `out` itself when it is device memory, else a device copy
    (holding out's values when `read`) written back by finish()."""

    def __init__(self, out: np.ndarray, dev: RuntimeDevice, read: bool, *others):
        self.out = out
        if isinstance(out, CudaView):  # a device array: written in place
            self.dev = to_device(out, dev)
            return
        aliased = any(np.may_share_memory(out, o) for o in others if not isinstance(o, CudaView))
        if not dev.host_visible:  # written into a device copy by _Staging, back to out's memory
            if _whole(out) and out.dtype.isnative:
                self.dev = out
            else:  # in the machine's byte order: finish() swaps the bytes of a big-endian out
                native = out.dtype.newbyteorder("=") if not out.dtype.isnative else out.dtype
                self.dev = np.array(out, dtype=native) if read else np.empty(out.shape, native)
        elif _on_device(out, dev) and not aliased and out.dtype.isnative and _whole(out):
            self.dev = out
        else:  # in the machine's byte order: finish() swaps the bytes of a big-endian out
            self.dev = dev.empty(out.shape, out.dtype.newbyteorder("=") if not out.dtype.isnative else out.dtype, "C")
            if read and out.size:
                self.dev[...] = out

    def finish(self):
        if self.dev is not self.out and self.out.size:
            self.out[...] = self.dev
        return self.out


def _strides(x: np.ndarray) -> list[int]:
    return [s // x.itemsize for s in x.strides]


# ---- GEMM -------------------------------------------------------------------------------------------
def _gemm_operands(a, b, c):
    """(shape [M, N, K, batch1, batch2], 12 element strides) of operands with 0 to 2 batch dims."""
    nd = a.ndim
    sa, sb, sc = _strides(a), _strides(b), _strides(c)
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    batch1 = batch2 = 1
    b1 = [0, 0, 0]
    b2 = [0, 0, 0]
    if nd >= 3:
        batch2 = a.shape[-3]
        b2 = [sa[-3], sb[-3], sc[-3]]
    if nd == 4:
        batch1 = a.shape[0]
        b1 = [sa[0], sb[0], sc[0]]
    strides = [sa[-2], sa[-1], sb[-2], sb[-1], sc[-2], sc[-1], *b1, *b2]
    return [M, N, K, batch1, batch2], strides


def _epilogue_addresses(fused, target, st: "_Staging", dev: RuntimeDevice, given: dict | None = None) -> list[int]:
    """The device addresses of a fused epilogue's operands for one launch (0 where a step is
    absent): its vectors and residual (with target's element strides) put where the device reads."""
    d = fused.core(target, **(given or {}))
    out = []
    for name in ("scale", "row_scale", "bias", "residual"):
        x = d.get(name)
        if x is None:
            out.append(0)
            continue
        xd = to_device(x, dev)
        st.keep(xd)  # alive until the launch is over (a shared-memory copy is freed with its array)
        out.append(st.address(xd))
    return out


def gemm(a, b, c, alpha, beta, types, dev: RuntimeDevice, plan=None, fused=None):
    """c = alpha * a @ b + beta * c on `dev` for checked operands (a: [batch..] M x K, b: K x N,
    c: M x N, 0 to 2 batch dims, broadcasting by zero strides); returns c. `fused`: the product's
    epilogue (coopjit._epilogue.Epilogue), applied in the kernel."""
    if c.size == 0:
        return c
    if fused is not None and isinstance(c, CudaView) and not c.c_contiguous:
        raise ValueError("a fused epilogue's device output must be C-contiguous (the residual shares its strides)")
    if fused is not None and not isinstance(c, CudaView) and not c.flags.c_contiguous:  # the residual shares its strides
        tmp = np.array(c, order="C") if beta != 0.0 else np.empty(c.shape, c.dtype)
        gemm(a, b, tmp, alpha, beta, types, dev, plan, fused)
        c[...] = tmp
        return c
    A = to_device(a, dev)
    B = to_device(b, dev)
    out = _Output(c, dev, beta != 0.0, a, b)
    shape, strides = _gemm_operands(A, B, out.dev)
    k = _core.gpu_gemm_kernel(dev.name, list(types), shape, strides, beta != 0.0, dev.plan_overrides(plan),
                              None if fused is None else fused.steps())
    st = _Staging(dev)
    epi = [] if fused is None else _epilogue_addresses(fused, out.dev, st, dev)
    k.run(list(types), shape, strides, st.address(A), st.address(B), st.address(out.dev, True), alpha, beta, epi)
    st.finish()
    return out.finish()


class GpuKernel:
    """A compiled GEMM kernel for one problem on a GPU device (see coopjit.compile_gemm)."""

    def __init__(self, m, n, k, dtype, trans_a, trans_b, accumulate, plan, out_dtype, dev: RuntimeDevice, fused=None):
        self.m, self.n, self.k = m, n, k
        self.dtype = dtype
        self._dev = dev
        self.device = dev.name
        self._fused = fused
        self._types, self.out_dtype = kernel_types(dtype, out_dtype, fused)
        self.trans_a, self.trans_b, self.accumulate = trans_a, trans_b, accumulate
        sa = (1, m) if trans_a else (k, 1)
        sb = (1, k) if trans_b else (n, 1)
        self._shape = [m, n, k, 1, 1]
        self._spec_strides = [*sa, *sb, n, 1, 0, 0, 0, 0, 0, 0]
        self._overrides = dev.plan_overrides(plan)
        self._core = _core.gpu_gemm_kernel(dev.name, list(self._types), self._shape, self._spec_strides, accumulate,
                                           self._overrides, None if fused is None else fused.steps())

    def _core_for(self, beta):
        """The compiled kernel a call with this beta runs. A kernel compiled with accumulate=True
        reads C and adds beta * C; called with beta = 0 it runs its sibling without accumulation,
        which never reads C (as BLAS, coopjit.gemm and the CPU kernels: NaN or inf in C, or a C
        made for the call and never written, do not come through). The sibling takes this kernel's
        plan= fields and is compiled on first use."""
        if not self.accumulate or beta != 0.0:
            return self._core
        k = self.__dict__.get("_core_no_c")
        if k is None:
            k = _core.gpu_gemm_kernel(self._dev.name, list(self._types), self._shape, self._spec_strides, False,
                                      self._overrides,
                                      None if self._fused is None else self._fused.steps())
            self._core_no_c = k
        return k

    @property
    def config(self):
        """The plan as a value (coopjit.Plan: layout, tile, subgroup size, work-group shape, ...) that
        plan= takes back."""
        return from_core(self._core.config, self._dev.plan_target)

    def source(self, kind: str | None = None) -> str:
        """"spirv" (the disassembly) or "ptx" (NVIDIA devices; the default there), "ir" (the
        kernel IR) or "llvm" (what the SPIR-V / NVPTX backend got)."""
        return self._core.source(kind or self._dev.default_source)

    @property
    def spirv(self) -> bytes:
        """The SPIR-V module (binary)."""
        return self._core.spirv

    def __call__(self, a, b, c=None, *, alpha=1.0, beta=0.0, bias=None, residual=None, scale=None, row_scale=None):
        if (self._fused is None and type(a) is not np.ndarray and bias is None and residual is None and scale is None
                and row_scale is None):
            got = _cuda_fast.kernel_call(self, a, b, c, alpha, beta)
            if got is not None:
                return got
        given = {"bias": bias, "residual": residual, "scale": scale, "row_scale": row_scale}
        views = [device_view(x, False) for x in (a, b, c) if x is not None and type(x) is not np.ndarray]
        if any(v is not None for v in views):
            return self._call_device_arrays(a, b, c, alpha, beta, given)
        if self._fused is None and any(v is not None for v in given.values()):
            raise ValueError("this kernel was compiled without an epilogue; pass bias= / residual= / scale= / "
                             "row_scale= to compile_gemm")
        if not self._dev.launches:
            raise RuntimeError(f"this kernel was generated for {self._dev.target} and validated with spirv-val, "
                               "but there is no such device here to run it on")
        alpha_in = alpha
        a, b, c, alpha, beta = check_kernel_call(self, a, b, c, alpha, beta)
        if self._fused is not None and np.dtype(self.dtype).kind in "iu":  # alpha in float (Epilogue.fold_alpha)
            alpha = self._fused.fold_alpha_call(check_scalar(alpha_in, "alpha"), given, self.k, np.dtype(self.dtype),
                                                np.dtype(self.dtype))
        if c.size == 0:
            return c
        self._launch(a, b, c, alpha, beta, given)
        return c

    def _planned(self, x):
        """Host operand x (a or b as given) in the layout the kernel was planned for, C order with
        the exact strides (_arrays.row_major): itself, or a C-ordered copy (in the device's memory
        on host-visible devices, where to_device would copy it again). Strided, Fortran-ordered
        and reversed views raised a plan mismatch on CUDA, and views of coopjit.empty memory
        everywhere (the staged or shared view kept its strides: another plan)."""
        if isinstance(x, CudaView) or row_major(x):
            return x
        if not self._dev.host_visible:
            return np.array(x, order="C")
        if not _on_device(x, self._dev):
            return x  # to_device's copy is C-ordered
        d = self._dev.empty(x.shape, x.dtype, "C")
        if x.size:
            d[...] = x
        return d

    def _launch(self, a, b, target, alpha, beta, given):
        """One launch on checked operands (host arrays or C-ordered CudaViews) into `target`."""
        # The kernel was compiled for a C-ordered C: a host c in another layout is written through
        # a C-ordered copy (host-visible devices make that copy in _Output for memory of their own;
        # the residual of an epilogue shares the output's strides).
        if (isinstance(target, np.ndarray) and not row_major(target)
                and (self._fused is not None or not self._dev.host_visible or _on_device(target, self._dev))):
            tmp = np.array(target, order="C") if beta != 0.0 else np.empty(target.shape, target.dtype)
            self._launch(a, b, tmp, alpha, beta, given)
            target[...] = tmp
            return
        # Copied as given, then transposed: the device operands keep the strides the kernel was
        # planned for (a copy of a.T would be C-ordered, another plan).
        A, B = to_device(self._planned(a), self._dev), to_device(self._planned(b), self._dev)
        A, B = (A.T if self.trans_a else A), (B.T if self.trans_b else B)
        out = _Output(target, self._dev, beta != 0.0, a, b)
        shape, strides = _gemm_operands(A, B, out.dev)
        st = _Staging(self._dev)
        epi = [] if self._fused is None else _epilogue_addresses(self._fused, out.dev, st, self._dev, given)
        self._core_for(beta).run(list(self._types), shape, strides, st.address(A), st.address(B),
                                 st.address(out.dev, True), alpha, beta, epi)
        st.finish()
        out.finish()

    def _call_device_arrays(self, a, b, c, alpha, beta, given, record=None):
        """A call with CUDA device arrays (read and written in place; host operands copied in); the
        result a device array of the inputs' framework. All operands on the device: queued on their
        stream without waiting (see coopjit._cuda_arrays); `record` as _gemm_fused._device_product's."""
        scalar = int_scalar if np.dtype(self.dtype).kind in "iu" else check_scalar  # (integers exact for int32)
        alpha_in = alpha
        alpha, beta = scalar(alpha, "alpha"), scalar(beta, "beta")
        if self._fused is not None and np.dtype(self.dtype).kind in "iu":  # alpha in float (Epilogue.fold_alpha)
            given = dict(given)
            alpha = self._fused.fold_alpha_call(check_scalar(alpha_in, "alpha"), given, self.k, np.dtype(self.dtype),
                                                np.dtype(self.dtype))
        ops = []
        for name, x, want in (("a", a, (self.k, self.m) if self.trans_a else (self.m, self.k)),
                              ("b", b, (self.n, self.k) if self.trans_b else (self.k, self.n))):
            v = device_view(x, False)
            v = v if v is not None else native_order(as_array(x, name))
            if np.dtype(v.dtype) != np.dtype(self.dtype):
                raise TypeError(f"{name} has dtype {v.dtype}; this kernel was compiled for {self.dtype}")
            if tuple(v.shape) != want:
                raise ValueError(f"{name} has shape {tuple(v.shape)}; this kernel was compiled for {want}")
            if isinstance(v, CudaView) and v.device != self.device:
                raise ValueError(f"{name} is on {v.device}; this kernel was compiled for {self.device}")
            ops.append(v)
        check_beta(self, c is not None, beta)
        first = next(v for v in ops + [device_view(c, False) if c is not None else None] if isinstance(v, CudaView))
        given_c = c is not None
        if c is None:
            c, beta = result_like(first, (self.m, self.n), np.dtype(self.out_dtype), self.device), 0.0
        vc = device_view(c, False)
        target = vc if vc is not None else as_array(c, "c", writable=True)
        if tuple(target.shape) != (self.m, self.n) or np.dtype(target.dtype) != np.dtype(self.out_dtype):
            raise ValueError(f"c must be a {np.dtype(self.out_dtype)} array of shape {(self.m, self.n)}, got "
                             f"{target.dtype} {tuple(target.shape)}")
        if vc is not None and vc.device != self.device:
            raise ValueError(f"c is on {vc.device}; this kernel was compiled for {self.device}")
        if given_c and vc is not None:
            lo, hi = vc.span()
            for name, x in zip("ab", ops):
                if isinstance(x, CudaView) and hi > lo and x.span()[0] < hi and lo < x.span()[1]:
                    raise ValueError(f"c ({vc.framework} {vc.dtype} {vc.shape}) overlaps {name}'s memory: pass a "
                                     "separate output array")
        # The kernel was planned for C-ordered a, b and c (as given): device arrays in another layout
        # (a.t(), x[:, ::2], ...) go through C-ordered copies made by their own framework on its
        # stream (c's written back after the launch); host operands in _launch. They raised "these
        # operands need plan ..." naming plan keys. (coopjit.matmul / gemm plan for any strides.)
        copies = []
        for i, name in enumerate("ab"):
            if isinstance(ops[i], CudaView):
                ops[i], copy = c_ordered(ops[i], name)
                copies += [] if copy is None else [copy]
        c_copy = None
        if isinstance(target, CudaView):
            given_view = target
            target, c_copy = c_ordered(target, "c", write=True)
            if c_copy is not None and beta != 0.0:
                copy_in(c_copy, given_view)
        views = [v for v in (*ops, target) if isinstance(v, CudaView)]
        epi = None if self._fused is None or len(views) < 3 else self._device_epilogue(given, target)
        if len(views) == 3 and (self._fused is None or epi is not None) and self.m and self.n:
            stream = launch_stream(views + [v for v in epi or () if v is not None])
            if stream is not None:
                A, B = (ops[0].T if self.trans_a else ops[0]), (ops[1].T if self.trans_b else ops[1])
                launch = self._launcher(A, B, target, beta)
                if launch is not None and launch.fused:  # (a kernel that only converts C has no epilogue operands)
                    launch.launch(A.ptr, B.ptr, target.ptr, alpha, beta, stream, [0 if v is None else v.ptr for v in epi])
                    if c_copy is not None:
                        copy_back(given_view, c_copy)
                    return c
                if launch is not None:
                    launch.launch(A.ptr, B.ptr, target.ptr, alpha, beta, stream)
                    if c_copy is not None:
                        copy_back(given_view, c_copy)
                    elif record is not None and not copies and all(v.framework == "torch" for v in views):
                        record["entry"] = (launch, (self.m, self.n), getattr(c, "dtype", None), getattr(c, "device", None),
                                           *[(x.span()[0] - x.ptr, x.span()[1] - x.ptr) for x in (A, B, target)])
                    return c
        wait_for(views)
        self._launch(ops[0], ops[1], target, alpha, beta, given)
        if c_copy is not None:
            copy_back(given_view, c_copy)
        return c

    def _device_epilogue(self, given: dict, target):
        """The device views [scale, row_scale, bias, residual] (None where a step is absent) of this
        kernel's epilogue for a call (`given` over the arrays compile_gemm bound), read in place by
        the launch; None when one of them is a host array, is missing, or the epilogue has a function
        (the synchronous path stages them, or says what is wrong). ValueError naming a device operand
        of the wrong dtype, length, shape, strides or device."""
        ep = self._fused
        if ep.fn is not None or (isinstance(target, CudaView) and not target.c_contiguous):
            return None
        lengths = {"scale": self.n, "row_scale": self.m, "bias": self.n if ep.bias_axis == 1 else self.m}
        out = []
        for name in ("scale", "row_scale", "bias", "residual"):
            x = given.get(name)
            if not ep.has[name]:
                if x is not None:
                    return None
                out.append(None)
                continue
            x = ep.bound.get(name) if x is None else x
            v = None if x is None else device_view(x, False)
            if v is None:
                return None
            v = ep.residual_like(target, v) if name == "residual" else ep.vector(name, v, lengths[name])
            if v.device != self.device:
                raise ValueError(f"{name} ({v.framework} {v.dtype} {v.shape}) is on {v.device}; this kernel was "
                                 f"compiled for {self.device}")
            out.append(v)
        return out

    def _launcher(self, A, B, target, beta):
        """The prepared launch (C++ GpuGemmLaunch) for device views of these strides, made once (for
        the kernel this beta runs: _core_for)."""
        shape, strides = _gemm_operands(A, B, target)
        aligned = (A.ptr | B.ptr) & 15 == 0
        core = self._core_for(beta)
        key = (tuple(strides), aligned, core is self._core)
        cache = self.__dict__.setdefault("_launches", {})
        if key not in cache:
            for name, x in (("a", A), ("b", B), ("c", target)):
                if any(st % x.itemsize for st in x.strides):
                    raise ValueError(f"a device array with byte strides {x.strides} that are not whole {x.dtype} "
                                     f"elements ({name})")
            if len(cache) > 256:
                cache.clear()
            cache[key] = core.launcher(list(self._types), shape, strides, aligned)
        return cache[key]

    def __repr__(self):
        cfg = self.config
        return (f"Kernel(gemm {self.dtype} M={self.m} N={self.n} K={self.k} on {self.device}; plan layout="
                f"{cfg['layout']} tile={cfg['mr']}x{cfg['nr']} kb={cfg['kb']} subgroup={cfg['subgroup_size']} "
                f"work-group={cfg['sg_m']}x{cfg['sg_n']} split={cfg['split']} dpas={cfg['dpas']} "
                f"block2d={cfg['block2d']})")


# ---- reductions -------------------------------------------------------------------------------------
def reduce2d(op, form, x2d, y, types, dev: RuntimeDevice):
    """The CPU path's reduce2d on a device: y = op over the rows / columns / 2x2 blocks of x2d."""
    X = to_device(x2d, dev)
    out = _Output(y, dev, False, x2d)
    Y = out.dev
    if form == "2x2":
        sy = _strides(Y)
    else:
        sy = [0, _strides(Y)[0]]
    st = _Staging(dev)
    prog = _core.gpu_reduce(dev.name, op, form, list(types), list(X.shape), [*_strides(X), *sy], st.address(X),
                            st.address(Y, True))
    st.finish()
    out.finish()
    return prog


# ---- user kernels (coopjit.ir) --------------------------------------------------------------------------
class DeviceCustomKernel:
    """A user kernel compiled for a device: call it with its parameters in order (arrays for
    pointers, numbers for scalars) and groups= the number of work-groups, required when the
    kernel reads work-group ids (no default could know how much of the data it covers; 1 else)."""

    def __init__(self, program, dev: RuntimeDevice, check, reads_groups: bool = True):
        self._p = program
        self._check = check
        self._dev = dev
        self.device = dev.name
        self.reads_groups = reads_groups

    def __call__(self, *args, groups: int | None = None):
        params = self._p.params
        if len(args) != len(params):
            raise ValueError(f"the kernel takes {len(params)} arguments, got {len(args)}")
        if groups is None:
            if self.reads_groups:
                raise TypeError("the kernel reads work-group ids, so its launch grid is required: call it with "
                                "groups=<number of work-groups>")
            groups = 1
        if isinstance(groups, bool) or not isinstance(groups, (int, np.integer)):
            raise TypeError(f"groups must be an int, got {type(groups).__name__}")
        groups = int(groups)
        # Sizes, writeability, element sizes and byte order against what the kernel can touch.
        written = self._check.check(list(args), groups)
        # Each array's elements in C order, where the device reads them: in place (C-contiguous
        # device memory, or on CUDA a C-contiguous host array staged into device memory), else a
        # C-order copy written back when the kernel writes it. The same array passed twice is
        # staged once, and written back when either parameter writes it.
        st = _Staging(self._dev)
        writes = {}
        for i, (a, t) in enumerate(zip(args, params)):
            if t.startswith("ptr<"):
                writes[id(a)] = writes.get(id(a), False) or bool(written[i])
        values, backs, addresses, keep = [], [], {}, []  # keep: the copies stay alive through the launch
        for i, (a, t) in enumerate(zip(args, params)):
            if not t.startswith("ptr<"):
                values.append(a)
                continue
            if id(a) in addresses:
                values.append(addresses[id(a)])
                continue
            if a.flags.c_contiguous and (st.copies or _on_device(a, self._dev)):
                d = a
            else:
                for j, b in enumerate(args):
                    if (j != i and b is not a and isinstance(b, np.ndarray) and (written[i] or written[j])
                            and np.may_share_memory(a, b)):
                        raise ValueError(f"argument {i} is copied for the device (not C-contiguous device "
                                         f"memory) and overlaps argument {j}, which the kernel "
                                         f"{'also reaches' if written[i] else 'writes'}: pass separate arrays")
                if st.copies:
                    d = np.ascontiguousarray(a)
                else:
                    d = self._dev.empty(a.shape, a.dtype, "C")
                    if a.size:
                        d[...] = a
                if writes[id(a)]:
                    backs.append((a, d))
            keep.append(d)
            addresses[id(a)] = st.address(d, writes[id(a)])
            values.append(addresses[id(a)])
        self._p.launch(values, groups)
        st.finish()
        for a, d in backs:
            if a.size:
                a[...] = d

    @property
    def subgroup_size(self) -> int:
        return self._p.subgroup_size

    @property
    def work_group_size(self) -> int:
        return self._p.work_group_size

    def source(self, kind: str | None = None) -> str:
        return self._p.source(kind or self._dev.default_source)

    @property
    def spirv(self) -> bytes:
        return self._p.spirv
