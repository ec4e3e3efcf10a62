"""matmul / gemm with a fused epilogue (coopjit._epilogue) or with CUDA device arrays among the
operands (coopjit._cuda_arrays): the paths _gemm.matmul / gemm take when either is asked for."""
from __future__ import annotations

import numpy as np

from . import _core, _cuda_arrays
from ._arrays import (_collapse_batch, as_array, check_scalar, contiguous, gemm_types, int_scalar, kernel_readable,
                      native_dtype, native_order, overlaps, promote)
from ._cpu import _run_fused
from ._epilogue import Epilogue, check_operands_given, fused_out_types, requested
from ._kernel_args import _overrides
from .devices import check_device, get


def _device_product(where, a, b, c, alpha, beta, trans_a, trans_b, device, plan, kw, record=None):
    """matmul / gemm with CUDA device arrays among the operands: read and written where they are
    (host operands are copied in for the launch), the result a device array of the inputs'
    framework. matmul takes stacks (N-D operands broadcast over their leading dims, as
    numpy.matmul); gemm 2-D operands. When every operand is a device array the product is queued
    on their stream (_cuda_arrays.launch_stream) without waiting; `record`: a dict that gets the
    launch ("entry") for _cuda_fast's cache when the call was one it can repeat."""
    alpha_in, beta_in = alpha, beta  # (integer products take integers exactly: int_scalar)
    alpha, beta = check_scalar(alpha, "alpha"), check_scalar(beta, "beta")
    va, vb = _cuda_arrays.device_view(a, False), _cuda_arrays.device_view(b, False)
    vc = None if c is None else _cuda_arrays.device_view(c, False)
    first = next(v for v in (va, vb, vc) if v is not None)
    dev = first.device
    if device is not None and check_device(device) != dev:
        raise ValueError(f"{where}: device={device!r}, but the device arrays are on {dev}")
    check_device(dev)
    A = va if va is not None else native_order(as_array(a, "a"))
    B = vb if vb is not None else native_order(as_array(b, "b"))
    for name, x in (("a", A), ("b", B)):
        if isinstance(x, _cuda_arrays.CudaView) and x.device != dev:
            raise ValueError(f"{where}: {name} is on {x.device}, the other device arrays on {dev}")
        if where == "gemm" and x.ndim != 2:
            raise ValueError(f"{where}: {name} must be 2-D, got {x.ndim}-D with shape {x.shape}")
        if x.ndim < 2:
            raise NotImplementedError(f"{where}: products of device arrays take operands of 2 or more dims; {name} "
                                      f"has shape {x.shape} (reshape it to a row or a column)")
    opa, opb = (A.T if trans_a else A), (B.T if trans_b else B)
    if opa.shape[-1] != opb.shape[-2]:
        raise ValueError(f"{where}: a has shape {A.shape} and b has shape {B.shape}: inner dimensions differ "
                         f"({opa.shape[-1]} != {opb.shape[-2]})")
    try:
        batch = tuple(np.broadcast_shapes(opa.shape[:-2], opb.shape[:-2]))
    except ValueError:
        raise ValueError(f"{where}: batch dims of a {A.shape} and b {B.shape} do not broadcast") from None
    m, n = opa.shape[-2], opb.shape[-1]
    out_dtype = kw.pop("out_dtype", None)
    bias_axis = kw.pop("bias_axis", 1)
    if c is not None:
        cdt = vc.dtype if vc is not None else native_dtype(as_array(c, "c").dtype)
        out_dtype = cdt if out_dtype is None else out_dtype
    ep = None
    if requested({**kw, "out_dtype": out_dtype if c is None else None}) or (
            out_dtype is not None and _fused_out_needed(A.dtype, B.dtype, out_dtype)):
        if batch:
            raise NotImplementedError(f"{where}: a fused epilogue on stacked device arrays (a {A.shape}, b {B.shape}) "
                                      "is not supported in this version; 2-D operands take one")
        check_operands_given(where, kw)
        ep = Epilogue(where, A.dtype, B.dtype, m, n, bias_axis=bias_axis, out_dtype=out_dtype, sync=False, **kw)
        (ta, tb, _), _ = gemm_types(A.dtype, B.dtype)
        types, dtype = ep.types(ta, tb), ep.out_dtype
    else:
        types, dtype = gemm_types(A.dtype, B.dtype, out_dtype)
    if types[0] in ("i8", "u8"):
        beta = int_scalar(beta_in, "beta")
        if ep is None or ep.etype == np.float64:
            alpha = int_scalar(alpha_in, "alpha")
        else:  # a float output: alpha in float, folded into the scale step (Epilogue.fold_alpha)
            alpha = ep.fold_alpha(alpha)
    shape = batch + (m, n)
    given = c is not None
    if c is None:
        c, beta = _cuda_arrays.result_like(first, shape, np.dtype(dtype), dev), 0.0
        vc = _cuda_arrays.device_view(c, False)
    target = vc if vc is not None else as_array(c, "c", writable=True)
    if vc is not None and vc.device != dev:
        raise ValueError(f"{where}: the output is on {vc.device}, the operands on {dev}")
    if tuple(target.shape) != shape:
        raise ValueError(f"{where}: the output has shape {tuple(target.shape)} but the product has shape {shape}")
    if np.dtype(target.dtype) != np.dtype(dtype):
        raise TypeError(f"{where}: the output has dtype {target.dtype}, the product writes {np.dtype(dtype)}")
    if given and vc is not None:
        lo, hi = vc.span()
        for name, x in (("a", va), ("b", vb)):
            if x is not None and hi > lo and x.span()[0] < hi and lo < x.span()[1]:
                raise ValueError(f"{where}: the output ({vc.framework} {vc.dtype} {vc.shape}) overlaps {name}'s memory: "
                                 "pass a separate output array")
    if 0 in shape:
        return c
    views = [x for x in (opa, opb, target) if isinstance(x, _cuda_arrays.CudaView)]
    host = len(views) < 3
    keep = []
    if batch and host:  # host operands of a stack: copied to device memory first (complete before the launch)
        if not isinstance(target, _cuda_arrays.CudaView):
            raise NotImplementedError(f"{where}: stacked products of device arrays need a device output, got "
                                      f"{type(c).__name__}")
        ops = []
        for x in (opa, opb):
            if not isinstance(x, _cuda_arrays.CudaView):
                keep.append(_cuda_arrays.DeviceArray.from_host(x, dev))
                x = keep[-1]._view
            ops.append(x)
        opa, opb = ops
    if batch:
        opa, opb, target = _collapse_device_batch(where, opa, opb, target, batch)
    epi = None  # the epilogue's operands when all of them are device arrays (the launch reads them in place)
    if ep is not None:
        if isinstance(target, _cuda_arrays.CudaView) and not target.c_contiguous:
            raise ValueError(f"{where}: a fused epilogue's device output must be C-contiguous (the residual shares its "
                             f"strides), got {target.framework} {target.dtype} {target.shape} with byte strides "
                             f"{target.strides}")
        epi = None if host else _device_epilogue(where, ep, target, dev)
    epi_views = [v for v in epi or () if v is not None]
    stream = None if host or (ep is not None and epi is None) else _cuda_arrays.launch_stream(views + epi_views)
    if stream is not None:
        launch = _launcher(dev, types, opa, opb, target, beta != 0.0, plan, ep)
        if launch is not None:
            if not launch.fused:  # (an epilogue that only converts C has no operands)
                launch.launch(opa.ptr, opb.ptr, target.ptr, alpha, beta, stream)
            else:
                launch.launch(opa.ptr, opb.ptr, target.ptr, alpha, beta, stream, [0 if v is None else v.ptr for v in epi])
            every = views + epi_views
            if record is not None and views[0].framework in ("torch", "cupy") and all(
                    v.framework == views[0].framework for v in every):
                record["entry"] = (launch, shape, getattr(c, "dtype", None), getattr(c, "device", None),
                                   _rel_span(opa), _rel_span(opb), _rel_span(target))
            return c
    _cuda_arrays.wait_for(views if ep is None else views + _epilogue_views(ep))
    get(dev).gemm(opa, opb, target, alpha, beta, types, plan, fused=ep)
    del keep
    return c


def _device_epilogue(where, ep: Epilogue, target, dev: str):
    """The device views of a fused epilogue's operands [scale, row_scale, bias, residual] (None where
    a step is absent) for a launch that reads them in place; None when any of them is a host array
    (or the epilogue has a user function): the synchronous path stages those. Device operands are
    checked here (their dtype, length or shape and contiguity when the Epilogue took them), on the
    device of the product."""
    if ep.fn is not None:
        return None
    out = []
    for name in ("scale", "row_scale", "bias", "residual"):
        if not ep.has[name]:
            out.append(None)
            continue
        x = ep.bound.get(name)
        if x is None:  # (bias=True and the like: the synchronous path says what is missing)
            return None
        if name == "residual":
            v = _cuda_arrays.device_view(x, False)
            if v is None:
                return None
            v = ep.residual_like(target, v)  # the output's shape, C order, the compute dtype
        elif isinstance(x, _cuda_arrays.CudaView):
            v = x
        else:
            return None
        if v.device != dev:
            raise ValueError(f"{where}: {name} ({v.framework} {v.dtype} {v.shape}) is on {v.device}, the product's "
                             f"operands on {dev}")
        out.append(v)
    return out


def _epilogue_views(ep: Epilogue) -> list:
    """The epilogue's operands that are device arrays (the synchronous path waits for their stream too)."""
    out = []
    for name in ("scale", "row_scale", "bias", "residual"):
        v = _cuda_arrays.device_view(ep.bound.get(name), False) if ep.has[name] else None
        if v is not None:
            out.append(v)
    return out


def _rel_span(v) -> tuple[int, int]:
    lo, hi = v.span()
    return lo - v.ptr, hi - v.ptr


_LAUNCHERS: dict = {}  # (device, types, shape, strides, accumulate, plan, aligned, epilogue) -> GpuGemmLaunch or None


def _launcher(dev, types, a, b, c, accumulate, plan, ep: Epilogue | None = None):
    """The prepared launch (C++ GpuGemmLaunch) of a product of these device views, or None when
    its plan takes more than one launch (Stream-K): made once per shapes, strides, types, plan and
    epilogue steps (`ep`, without a user function: its operands are given at each launch)."""
    from ._gpu import _gemm_operands

    shape, strides = _gemm_operands(a, b, c)
    aligned = (a.ptr | b.ptr) & 15 == 0
    d = get(dev)
    overrides = d.plan_overrides(plan)
    steps = None if ep is None else ep.steps()
    key = (dev, tuple(types), tuple(shape), tuple(strides), accumulate, tuple(sorted(overrides.items())), aligned,
           None if steps is None else tuple(sorted((k, v) for k, v in steps.items() if k != "fn")))
    try:
        return _LAUNCHERS[key]
    except KeyError:
        pass
    for name, x in (("a", a), ("b", b), ("c", c)):
        if any(st % x.itemsize for st in x.strides):
            raise ValueError(f"a device array with byte strides {x.strides} that are not whole {x.dtype} elements "
                             f"({name})")
    k = _core.gpu_gemm_kernel(dev, list(types), shape, strides, accumulate, overrides, steps)
    launch = k.launcher(list(types), shape, strides, aligned)
    if len(_LAUNCHERS) > 4096:
        _LAUNCHERS.clear()
    _LAUNCHERS[key] = launch
    return launch


def _collapse_device_batch(where, a, b, c, batch):
    """Views of a, b, c (CudaViews, broadcast to `batch`) with their batch dims merged into at most
    two levels (the kernel's batch1 x batch2); ValueError naming the strides when they cannot be."""
    CudaView = _cuda_arrays.CudaView

    def full(x):  # batch strides right-aligned, 0 where x is broadcast
        nb = x.ndim - 2
        st = [0] * (len(batch) - nb) + [0 if x.shape[i] == 1 else x.strides[i] for i in range(nb)]
        return st

    strides = [full(x) for x in (a, b, c)]
    merged = []
    for i, n in enumerate(batch):
        if n == 1:
            continue
        st = [s[i] for s in strides]
        if merged and all(ps == q * n for ps, q in zip(merged[-1][1], st)):
            merged[-1] = (merged[-1][0] * n, st)
        else:
            merged.append((n, st))
    if len(merged) > 2:
        raise ValueError(f"{where}: the batch dims {batch} of the device arrays (byte strides a {a.strides}, b "
                         f"{b.strides}, out {c.strides}) do not merge into two levels; a copy would be needed: make "
                         "them contiguous (e.g. .contiguous())")
    out = []
    for j, x in enumerate((a, b, c)):
        shape = tuple(nn for nn, _ in merged) + tuple(x.shape[-2:])
        st = tuple(s[j] for _, s in merged) + tuple(x.strides[-2:])
        out.append(CudaView(x.ptr, shape, st, x.dtype, x.device, x.owner, x.framework, x.stream))
    return out


def _fused_out_needed(a_dtype, b_dtype, out_dtype) -> bool:
    """Whether out_dtype needs the epilogue's conversion (a plain product cannot write it)."""
    try:
        gemm_types(a_dtype, b_dtype, out_dtype)
        return False
    except TypeError:
        return True


def _matmul_fused(a, b, out, device, plan, kw, packed=False):
    """matmul with an epilogue (see coopjit._epilogue): 2-D or batched operands, a prepacked b
    (`packed`: b is a coopjit.PackedMatrix)."""
    where = "matmul"
    if out is not None and type(out) is not np.ndarray:
        _matmul_fused(a, b, as_array(out, "out", writable=True), device, plan, kw, packed)
        return out
    a = native_order(as_array(a, "a"))
    if not packed:
        b = native_order(as_array(b, "b"))
        a, b = promote(a, b)
    (ta, tb, _), _ = gemm_types(a.dtype, b.dtype)
    for name, x in (("a", a), ("b", b)):
        if len(x.shape) == 0:
            raise ValueError(f"{where}: {name} is 0-d; matmul needs operands of 1 or more dims")
    a2 = a[np.newaxis, :] if a.ndim == 1 else a
    b_shape = b.shape
    b2 = None if packed else (b[:, np.newaxis] if b.ndim == 1 else b)
    k_b, n = (b_shape[0], b_shape[1]) if packed else b2.shape[-2:]
    if a2.shape[-1] != k_b:
        raise ValueError(f"{where}: a has shape {a.shape} and b has shape {b_shape}: inner dimensions differ "
                         f"({a2.shape[-1]} != {k_b})")
    if packed and a.ndim != 2:
        raise ValueError(f"{where}: with a prepacked b, a must be 2-D, got shape {a.shape}")
    try:
        batch = np.broadcast_shapes(a2.shape[:-2], () if packed else b2.shape[:-2])
    except ValueError:
        raise ValueError(f"{where}: batch dims of a {a.shape} and b {b_shape} do not broadcast") from None
    m = a2.shape[-2]
    out_dtype = kw.pop("out_dtype")
    if out is not None:
        if out_dtype is not None and native_dtype(np.dtype(out_dtype)) != native_dtype(out.dtype):
            raise ValueError(f"{where}: out has dtype {out.dtype} but out_dtype={np.dtype(out_dtype)}")
        out_dtype = native_dtype(out.dtype)
        etype, default, allowed = fused_out_types(a.dtype, b.dtype)
        if out_dtype.name not in allowed:
            # numpy.matmul's out= rule, as the unfused path (_gemm.matmul) applies it: the result
            # cast to out's dtype when that is a 'same_kind' cast (a float32 product into a float64
            # out); computed in the epilogue's compute dtype, then cast (it was refused: "a fused
            # float32 x float32 product writes float32, bfloat16 or float16, not out_dtype=float64").
            if not np.can_cast(default, out_dtype, "same_kind"):
                raise TypeError(f"{where}: out has dtype {out.dtype}, but a fused {a.dtype} x {b.dtype} product is "
                                f"{default} and cannot be cast to it (numpy.matmul's 'same_kind' rule)")
            if not out.flags.writeable:
                raise ValueError(f"{where}: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
            tmp = _matmul_fused(a, b, None, device, plan, {**kw, "out_dtype": etype}, packed)
            if tmp.shape != out.shape:
                raise ValueError(f"{where}: out has shape {out.shape} but a @ b has shape {tmp.shape}")
            out[...] = tmp
            return out
    bias_axis = kw.pop("bias_axis")
    check_operands_given(where, kw)
    ep = Epilogue(where, a.dtype, b.dtype, m, n, bias_axis=bias_axis, out_dtype=out_dtype, **kw)
    result_shape = batch + tuple(s for s, keep in zip((m, n), (a.ndim >= 2, packed or b.ndim >= 2)) if keep)
    if ep.has["residual"] and _cuda_arrays.device_view(ep.bound["residual"]) is None:
        # broadcast against the result as the user sees it (1-D operands' dims removed)
        r = as_array(ep.bound["residual"], "residual")
        try:
            ep.bound["residual"] = np.broadcast_to(r, result_shape).reshape(batch + (m, n))
        except ValueError:
            raise ValueError(f"{where}: residual has shape {r.shape}, which does not broadcast to the result's shape "
                             f"{result_shape}") from None
    if out is None:
        out = np.empty(result_shape, ep.out_dtype)
    else:
        if out.shape != result_shape:
            raise ValueError(f"{where}: out has shape {out.shape} but a @ b has shape {result_shape}")
        if not out.flags.writeable:
            raise ValueError(f"{where}: out ({out.dtype} {out.shape}) is read-only; pass a writeable array")
    out_full = out.reshape(batch + (m, n)) if out.flags.c_contiguous else out
    if out_full is out and out.shape != batch + (m, n):
        out_full = np.empty(batch + (m, n), out.dtype)
    types = ep.types(ta, tb)
    dev = get(device)
    if packed:
        dev.check_prepacked(where)  # the CPU's: the product runs on its packed panels
        pb = b._for_a(a.dtype)
        _run_fused(a2, np.broadcast_to(pb._dummy, pb.shape), out_full, 1.0, 0.0, _overrides(pb._plan(plan)), types, ep,
                   pb.buffer)
    elif batch:
        _batched_fused(a2, b2, out_full, plan, types, ep, device)
    else:
        dev.gemm(a2, b2, out_full, 1.0, 0.0, types, plan, fused=ep)
    if out_full is not out and not np.shares_memory(out_full, out):
        out[...] = out_full.reshape(out.shape)
    return out


def _batched_fused(a, b, out, plan, types, ep: Epilogue, device: str = "cpu"):
    """out[...] = epilogue(a @ b) over broadcast batch dims, one launch; the residual is laid out
    like the (C-contiguous) output so that the kernel reads it with C's strides."""
    batch = out.shape[:-2]
    dev = get(device)
    a, b = dev.resident(a), dev.resident(b)  # device copies first, then zero-stride broadcasts of them (as _batched)
    A = kernel_readable(np.broadcast_to(a, batch + a.shape[-2:]))
    B = kernel_readable(np.broadcast_to(b, batch + b.shape[-2:]))
    if out.size == 0:
        return
    C = out
    if overlaps(out, a, b) or kernel_readable(out) is not out or not out.flags.c_contiguous:
        C = np.empty(out.shape, native_dtype(out.dtype))
    d = dev.epilogue_operands(ep, ep.core(C))
    R = d.get("residual")
    arrays = [A, B, C] + ([R] if R is not None else [])
    dims = _collapse_batch(arrays, batch)
    if len(dims) > 2:  # batch dims no stride pattern can merge: make the operands contiguous
        A, B = contiguous(A), contiguous(B)
        arrays = [A, B, C] + ([R] if R is not None else [])
        dims = _collapse_batch(arrays, batch)
    views = []
    for j, x in enumerate(arrays):
        shape = tuple(n for n, _ in dims) + x.shape[-2:]
        strides = tuple(st[j] for _, st in dims) + x.strides[-2:]
        raw = x.view(np.dtype(f"u{x.dtype.itemsize}"))
        views.append(np.lib.stride_tricks.as_strided(raw, shape, strides, writeable=x is C).view(x.dtype))
    if R is not None:
        d["residual"] = views[3]
    dev.gemm_views(views[0], views[1], views[2], types, plan, ep, d)
    if C is not out:
        out[...] = C


def _gemm_fused(a, b, c, alpha, beta, trans_a, trans_b, plan, bias_axis, kw, device="cpu", packed=False):
    """gemm with an epilogue (2-D operands or a prepacked b: `packed`)."""
    where = "gemm"
    if c is not None and type(c) is not np.ndarray:
        _gemm_fused(a, b, as_array(c, "c", writable=True), alpha, beta, trans_a, trans_b, plan, bias_axis, kw, device,
                    packed)
        return c
    alpha_in, beta_in = alpha, beta
    alpha = check_scalar(alpha, "alpha")
    beta = check_scalar(beta, "beta")
    a = native_order(as_array(a, "a"))
    if not packed:
        b = native_order(as_array(b, "b"))
    if packed and trans_b:
        raise ValueError(f"{where}: a prepacked b is packed as given; trans_b must be False")
    for name, x in (("a", a), ("b", b)):
        if len(x.shape) != 2:
            raise ValueError(f"{where}: {name} must be 2-D, got shape {x.shape}")
    (ta, tb, _), _ = gemm_types(a.dtype, b.dtype)
    if ta in ("i8", "u8"):
        # (alpha is applied in float, below: the output is a float type)
        beta = int_scalar(beta_in, "beta")
    opa = a.T if trans_a else a
    opb = None if packed else (b.T if trans_b else b)
    k_b, n = b.shape if packed else opb.shape
    if opa.shape[1] != k_b:
        raise ValueError(f"{where}: op(a) has shape {opa.shape} and op(b) has shape {(k_b, n)}: inner dimensions differ")
    m = opa.shape[0]
    out_dtype = kw.pop("out_dtype")
    if c is not None:
        if out_dtype is not None and native_dtype(np.dtype(out_dtype)) != native_dtype(c.dtype):
            raise ValueError(f"{where}: c has dtype {c.dtype} but out_dtype={np.dtype(out_dtype)}")
        out_dtype = native_dtype(c.dtype)
    check_operands_given(where, kw)
    ep = Epilogue(where, a.dtype, b.dtype, m, n, bias_axis=bias_axis, out_dtype=out_dtype, **kw)
    if ep.etype != np.float64 and a.dtype.name in ("int8", "uint8") and beta != 0.0:
        raise ValueError(f"{where}: an int8 product with an epilogue does not take beta (got beta={beta}); add c "
                         f"through residual=")
    if ta in ("i8", "u8"):
        alpha = ep.fold_alpha(alpha)
    if c is None:
        c, beta = np.empty((m, n), ep.out_dtype), 0.0
    else:
        if c.shape != (m, n):
            raise ValueError(f"{where}: c has shape {c.shape} but op(a) @ op(b) has shape {(m, n)}")
        if not c.flags.writeable:
            raise ValueError(f"{where}: c ({c.dtype} {c.shape}) is read-only; pass a writeable array")
    types = ep.types(ta, tb)
    dev = get(device)
    if packed:
        dev.check_prepacked(where)  # the CPU's: the product runs on its packed panels
        pb = b._for_a(a.dtype)
        _run_fused(opa, np.broadcast_to(pb._dummy, pb.shape), c, alpha, beta, _overrides(pb._plan(plan)), types, ep,
                   pb.buffer)
    else:
        dev.gemm(opa, opb, c, alpha, beta, types, plan, fused=ep)
    return c
