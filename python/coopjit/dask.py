"""coopjit under Dask: matmul, gemm and reduce on dask arrays whose tasks are coopjit kernels on
chunks, and tuning sweeps spread over the workers of a dask.distributed cluster.

    import dask.array as da, coopjit.dask as cjd
    x = da.random.default_rng(0).random((20000, 8000), chunks=(4000, 2000), dtype="float32")
    y = da.random.default_rng(1).random((8000, 12000), chunks=(2000, 4000), dtype="float32")
    z = cjd.matmul(x, y)              # a dask array; z.compute() / z.persist() run coopjit kernels
    s = cjd.reduce(z, axis=0, op="max")
    reports = coopjit.tune(["1024x1024x1024", "4000x4000x2000"], client=client)

Arrays. The output's chunks are x's row chunks and y's column chunks (and the broadcast batch
chunks of N-D operands). Each output block accumulates its products over K in one task where
chunks allow: the K chunks of a row panel of x and a column panel of y, the first product
written and the others added by coopjit.gemm with beta = 1 (no partial products, no sum pass).
When K has more chunks than `split_every`, or the output has too few blocks to keep the
cluster's threads busy, K is split into groups of chunks, each group accumulated in its own
task, and the groups' partial sums added in a tree of fan-in `split_every`. Chunks that do not
line up (x's K chunks against y's, batch chunks) are rechunked as dask.array.matmul does
(dask.array.core.unify_chunks). Products of float16 / bfloat16 accumulate across chunks in
float32 (as coopjit does inside one kernel) and are rounded to the output type once; int8 /
uint8 in int32. Each task plans its kernel for its chunk's shape; kernels come from coopjit's
disk cache, which the processes of one machine share (a lock file per kernel being compiled:
a kernel is compiled once per machine, whichever worker needs it first, and loaded by the
others).

Threads. Dask's convention is one core per worker thread: LocalCluster and `dask worker` start
as many threads as the machine has cores, and the nanny sets OMP_NUM_THREADS=1 (and MKL's,
OpenBLAS's) so that NumPy's BLAS does not start a pool per task. coopjit follows it: in a
dask.distributed worker process the first coopjit.dask task sets coopjit's pool to 1 worker
(every kernel runs on the task's own thread; single-worker launches do not serialize, so the
worker's threads run their kernels side by side), unless COOPJIT_NUM_THREADS is set in the
worker's environment, which then decides (for a cluster of one thread per machine, say:
`LocalCluster(n_workers=1, threads_per_worker=1, env={"COOPJIT_NUM_THREADS": "16"})`).
Under the local threaded scheduler (no distributed) the tasks run in the caller's process and
its pool is left as it is: launches of several workers serialize per process, so the process
never runs more kernel threads than its pool has. Note that a LocalCluster with processes
leaves its nanny's OMP_NUM_THREADS=1 in the creating process's os.environ: a coopjit pool
first used after that (and every child process started from it) has one worker; call coopjit
once before creating the cluster, or set COOPJIT_NUM_THREADS, to keep the machine's.

No __array_function__ / dispatch hook. coopjit.matmul takes NumPy arrays and returns a NumPy
array at once; handing it a dask array converts the whole array (np.asarray). A hook that made
numpy.matmul or coopjit.matmul on dask arrays return these lazy graphs would change what those
functions return for every caller in the process (registering into dask's dispatch changes
numpy.matmul(dask, dask) globally, and dask arrays already define __array_function__ to route
NumPy calls to dask.array). The explicit coopjit.dask.matmul says which engine runs the chunks.

Tuning sweeps. tune(problems, client) (also coopjit.tune(problems, client=client) and
`python -m coopjit tune --scheduler ADDRESS`) runs one coopjit.tune per problem on the workers,
at most one timing per machine at a time (a distributed.Lock per host name: the tasks of
several workers of one machine wait for each other), with the pool of a fresh process on that
machine (its CPUs, or COOPJIT_NUM_THREADS) unless `threads` says otherwise; the winners are
keyed by each worker's CPU (coopjit._tunedb.machine()), merged into this process's tuning
database and into every worker's, so that every machine of that CPU uses them.
"""
from __future__ import annotations

import math
import os
import socket
import string
import threading
import time
import uuid

import numpy as np

try:
    import dask.array as da
    from dask.array.core import unify_chunks
except ImportError as e:  # coopjit itself does not need dask
    raise ImportError(f"coopjit.dask needs dask.array ({e}); install it with pip install 'coopjit[dask]' "
                      f"(dask[array] and distributed)") from e

from . import _core, _tunedb
from ._arrays import as_dtype, gemm_types, native_dtype
from ._gemm import gemm as _gemm, matmul as _matmul
from ._reduce import OPS, _types as _reduce_types
from ._reduce import reduce as _reduce

__all__ = ["matmul", "gemm", "reduce", "tune", "worker_threads"]

_LOW_OUT = ("float16", "bfloat16")  # outputs that accumulate across chunks in float32
_MAX_FUSED = 8  # K chunks one task accumulates by default (its inputs are in memory at once)
_FAN_IN = 4  # partial sums one task adds by default

# ---------------------------------------------------------------------------------------------
# worker processes


_prepared = False
_prepare_mu = threading.Lock()


def _in_worker() -> bool:
    try:
        from distributed import get_worker
    except ImportError:
        return False
    try:
        get_worker()
        return True
    except ValueError:
        return False


def worker_threads() -> int:
    """coopjit's pool size in a dask.distributed worker process: COOPJIT_NUM_THREADS when the
    worker's environment sets it (at most coopjit._core.max_threads), else 1 (one core per worker
    thread, as Dask assumes)."""
    env = os.environ.get("COOPJIT_NUM_THREADS", "")
    try:
        n = int(env)
    except ValueError:
        n = 0
    return min(n, _core.max_threads) if n >= 1 else 1


def _prepare() -> None:
    """Once per process, at the first task: a worker process's pool (see the module's
    docstring); the caller's own process is left alone."""
    global _prepared
    if _prepared:
        return
    with _prepare_mu:
        if _prepared:
            return
        if _in_worker():
            _core.set_num_threads(worker_threads())
        _prepared = True


def _threads_of_client() -> int:
    """The threads that will run the graph: the default client's workers', else this
    machine's CPUs (the local threaded scheduler)."""
    try:
        from distributed import default_client

        return max(1, sum(default_client().nthreads().values()))
    except (ImportError, ValueError):
        return max(1, os.cpu_count() or 1)


# ---------------------------------------------------------------------------------------------
# matmul and gemm


def _acc_dtype(out: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if out.name in _LOW_OUT else out


def _block_product(xs, ys, *cs, alpha, beta, acc, plan):
    """One output block: alpha * sum_k xs[k] @ ys[k] (+ beta * cs[0]) in the dtype `acc`, the
    first product written and the others accumulated by the kernel (gemm with beta = 1)."""
    _prepare()
    if not isinstance(xs, list):  # one K chunk
        xs, ys = [xs], [ys]
    acc = np.dtype(acc)
    x0, y0 = xs[0], ys[0]
    if x0.ndim == 2 and y0.ndim == 2:
        out = np.empty((x0.shape[0], y0.shape[1]), acc)
        b = 0.0
        if cs and beta != 0.0:
            out[...] = cs[0]
            b = beta
        for xk, yk in zip(xs, ys):
            _gemm(xk, yk, out, alpha=alpha, beta=b, plan=plan)
            b = 1.0
        if b == 0.0:  # no product at all (no K chunk): beta * c, or zeros
            out[...] = 0
        return out
    # Stacks of matrices (batched leading dims, broadcast within the chunk): one launch per K
    # chunk, each product added to the running sum.
    batch = np.broadcast_shapes(x0.shape[:-2], y0.shape[:-2])
    out = np.zeros(batch + (x0.shape[-2], y0.shape[-1]), acc)
    part = np.empty_like(out) if len(xs) > 1 else out
    for xk, yk in zip(xs, ys):
        if part is out:
            _matmul(xk, yk, out=out, plan=plan)
        else:
            _matmul(xk, yk, out=part, plan=plan)
            out += part
    if alpha != 1.0:
        out *= alpha
    return out


def _add_blocks(*blocks):
    out = np.array(blocks[0], copy=True)
    for b in blocks[1:]:
        out += b
    return out


def _scale_add(s, *cs, alpha, beta):
    """alpha * s (+ beta * cs[0]) in s's dtype: the end of a product summed over several K chunks."""
    out = np.multiply(s, s.dtype.type(alpha))
    if cs:
        out += s.dtype.type(beta) * cs[0].astype(s.dtype, copy=False)
    return out


def _check_plan_and_split(plan, split_every):
    if plan is not None and not isinstance(plan, dict):
        raise TypeError(f"plan must be a dict of plan fields, got {type(plan).__name__} {plan!r}")
    if split_every is not None:
        if isinstance(split_every, bool) or not isinstance(split_every, (int, np.integer)):
            raise TypeError(f"split_every must be an int >= 2 or None, got {split_every!r}")
        if split_every < 2:
            raise ValueError(f"split_every must be at least 2, got {split_every}")


def _check_reduce_split(split_every, ndim: int):
    """split_every of reduce as dask takes it: None, an int >= 2, or {axis: int >= 2} with the axes
    normalized. dask itself takes 1 and less, and {0: 1} summed part of the array (345 for 780)."""
    def fan(n, what):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise TypeError(f"reduce: {what} must be an int >= 2, got {n!r}")
        if n < 2:
            raise ValueError(f"reduce: {what} must be at least 2, got {n}")
        return int(n)

    if split_every is None:
        return None
    if isinstance(split_every, dict):
        out = {}
        for ax, n in split_every.items():
            if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)) or not -ndim <= ax < ndim:
                raise ValueError(f"reduce: split_every has the key {ax!r}, not an axis of the array ({ndim} dims)")
            out[int(ax) % ndim] = fan(n, f"split_every[{ax}]")
        return out
    if not isinstance(split_every, (int, np.integer)) or isinstance(split_every, bool):
        raise TypeError(f"reduce: split_every must be None, an int >= 2 or a dict of axis -> int >= 2, got "
                        f"{split_every!r}")
    return fan(split_every, "split_every")


def _as_dask(x, name):
    if isinstance(x, da.Array):
        return x
    if hasattr(x, "__dask_graph__"):
        raise TypeError(f"{name} is a {type(x).__name__}; coopjit.dask takes dask arrays (or arrays to convert)")
    try:
        return da.asarray(x)
    except Exception as e:  # noqa: BLE001 - report what could not be converted
        raise TypeError(f"{name} cannot be converted to a dask array: {e}") from None


def _contract(x, y, out_dtype, *, alpha=1.0, beta=0.0, c=None, plan=None, split_every=None, fn="matmul"):
    """alpha * x @ y (+ beta * c) for dask arrays of ndim >= 2 with the same ndim (batch dims
    broadcast), as a dask array of `out_dtype`."""
    nd = x.ndim
    letters = [ch for ch in string.ascii_lowercase if ch not in "ijk"]
    if nd - 2 > len(letters):
        raise ValueError(f"{fn}: at most {len(letters)} batch dims, got {nd - 2}")
    batch = "".join(letters[: nd - 2])
    x_ind, y_ind, o_ind = batch + "ik", batch + "kj", batch + "ij"
    args = [x, x_ind, y, y_ind]
    if c is not None and beta != 0.0:
        args += [c, o_ind]
    _, arrays = unify_chunks(*args)  # K chunks of x and y line up, batch and output chunks too
    x, y = arrays[0], arrays[1]
    cu = arrays[2] if len(arrays) > 2 else None
    acc = _acc_dtype(out_dtype)
    nk = len(x.chunks[-1])
    out_blocks = 1
    for d in range(nd - 2):
        out_blocks *= max(len(x.chunks[d]), len(y.chunks[d]))
    out_blocks *= len(x.chunks[-2]) * len(y.chunks[-1])
    fan = split_every or _FAN_IN
    if split_every is not None:
        group = min(nk, split_every)
    else:
        group = min(nk, _MAX_FUSED)
        # Enough tasks for the threads (two each): split K when the output has too few blocks.
        want = 2 * _threads_of_client()
        if out_blocks * math.ceil(nk / group) < want:
            group = max(1, min(group, (nk * out_blocks) // want))
    bounds = np.cumsum((0,) + x.chunks[-1])
    meta = np.empty((0,) * nd, acc)
    # Over several K chunks alpha scales the whole sum once, at the end, as one kernel does: alpha
    # applied to each chunk's partial sum gave NaN for alpha = inf where the partial sums' signs
    # differ (inf - inf), and overflowed partial sums whose total fits. beta * c then joins there.
    late = nk > 1 and alpha != 1.0 and acc.kind == "f"
    cu_late, scale = (cu, alpha) if late else (None, 1.0)
    if late:
        alpha, cu = 1.0, None
    parts = []
    for g0 in range(0, nk, group):
        g1 = min(nk, g0 + group)
        k0, k1 = int(bounds[g0]), int(bounds[g1])
        xg = x[..., k0:k1] if (g0, g1) != (0, nk) else x
        yg = y[..., k0:k1, :] if (g0, g1) != (0, nk) else y
        extra = [cu, o_ind] if (cu is not None and g0 == 0) else []
        parts.append(da.blockwise(_block_product, o_ind, xg, x_ind, yg, y_ind, *extra, dtype=acc, meta=meta,
                                  concatenate=False, alpha=float(alpha),
                                  beta=float(beta) if extra else 0.0, acc=acc,
                                  plan=plan, name=f"coopjit-{fn}-" + _token(xg, yg, *extra[:1], alpha, beta, plan)))
    while len(parts) > 1:  # the tree of partial sums
        parts = [parts[i] if i + 1 == len(parts) else
                 da.map_blocks(_add_blocks, *parts[i:i + fan], dtype=acc, meta=meta,
                               name="coopjit-sum-" + _token(*parts[i:i + fan]))
                 for i in range(0, len(parts), fan)]
    out = parts[0]
    if late:
        extra = [cu_late] if cu_late is not None else []
        out = da.map_blocks(_scale_add, out, *extra, dtype=acc, meta=meta, alpha=float(scale), beta=float(beta),
                            name="coopjit-scale-" + _token(out, *extra, scale, beta))
    if out.dtype != out_dtype:
        out = out.astype(out_dtype)
    return out


def _token(*args):
    from dask.base import tokenize

    return tokenize(*args)


def matmul(x, y, *, plan: dict | None = None, split_every: int | None = None) -> da.Array:
    """x @ y for dask arrays (or arrays dask.array.asarray takes) with numpy.matmul's semantics:
    1-D operands promoted and their dim removed, N-D operands stacks of matrices broadcast over
    the leading dims; the dtypes coopjit.matmul takes (float32, float64, float16, bfloat16,
    float8 pairs, int8 / uint8 pairs) and its output dtypes. Returns a dask array whose tasks run
    coopjit kernels on chunks (see the module's docstring). `plan` overrides plan fields of every
    chunk's kernel; `split_every`: at most this many K chunks accumulated in one task, and the
    fan-in of the tree that adds the groups' partial sums."""
    _check_plan_and_split(plan, split_every)
    x = _as_dask(x, "x")
    y = _as_dask(y, "y")
    _, out_dtype = gemm_types(x.dtype, y.dtype)
    for name, a in (("x", x), ("y", y)):
        if a.ndim == 0:
            raise ValueError(f"matmul: {name} is 0-d (a scalar); matmul needs operands of 1 or more dims")
    x2 = x[np.newaxis, :] if x.ndim == 1 else x
    y2 = y[:, np.newaxis] if y.ndim == 1 else y
    if x2.shape[-1] != y2.shape[-2]:
        raise ValueError(f"matmul: x has shape {x.shape} and y has shape {y.shape}: inner dimensions differ "
                         f"({x2.shape[-1]} != {y2.shape[-2]})")
    try:
        np.broadcast_shapes(x2.shape[:-2], y2.shape[:-2])
    except ValueError:
        raise ValueError(f"matmul: batch dims of x {x.shape} and y {y.shape} do not broadcast") from None
    nd = max(x2.ndim, y2.ndim)
    x2 = x2[(np.newaxis,) * (nd - x2.ndim)] if x2.ndim < nd else x2
    y2 = y2[(np.newaxis,) * (nd - y2.ndim)] if y2.ndim < nd else y2
    out = _contract(x2, y2, out_dtype, plan=plan, split_every=split_every, fn="matmul")
    if x.ndim == 1:
        out = out[..., 0, :]
    if y.ndim == 1:
        out = out[..., 0]
    return out


def gemm(a, b, c=None, *, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False, trans_b: bool = False,
         plan: dict | None = None, split_every: int | None = None) -> da.Array:
    """alpha * op(a) @ op(b) + beta * c for 2-D dask arrays (op(x) = x.T when trans_x), as a new
    dask array (dask arrays are immutable: c is read, never written). As coopjit.gemm: beta == 0
    means c is not read; c's dtype, when given, is the output's (float32 for float16 / bfloat16
    operands, say). beta * c enters the first kernel of each output block (the accumulation
    starts from it), so no separate pass adds it."""
    from ._arrays import beta_without_c, check_scalar, int_scalar

    _check_plan_and_split(plan, split_every)
    if c is None:
        beta_without_c("gemm: ", beta)
    a = _as_dask(a, "a")
    b = _as_dask(b, "b")
    alpha_in, beta_in = alpha, beta
    alpha = check_scalar(alpha, "alpha")
    beta = check_scalar(beta, "beta")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm: a and b must be 2-D, got shapes {a.shape} and {b.shape}")
    if c is not None:
        c = _as_dask(c, "c")
    types, out_dtype = gemm_types(a.dtype, b.dtype, None if c is None else c.dtype)
    if types[0] in ("i8", "u8"):  # integers taken exactly (int32 accumulators)
        alpha, beta = int_scalar(alpha_in, "alpha"), int_scalar(beta_in, "beta")
    opa = a.T if trans_a else a
    opb = b.T if trans_b else b
    if opa.shape[1] != opb.shape[0]:
        raise ValueError(f"gemm: op(a) has shape {opa.shape} and op(b) has shape {opb.shape}: inner dimensions "
                         f"differ ({opa.shape[1]} != {opb.shape[0]})")
    shape = (opa.shape[0], opb.shape[1])
    if c is not None and c.shape != shape:
        raise ValueError(f"gemm: c has shape {c.shape} but op(a) @ op(b) has shape {shape}")
    return _contract(opa, opb, out_dtype, alpha=alpha, beta=beta, c=c, plan=plan, split_every=split_every, fn="gemm")


# ---------------------------------------------------------------------------------------------
# reduce


def _partial_dtype(dtype: np.dtype, op: str) -> np.dtype:
    """The dtype of a chunk's partial result: the reduction's output dtype, but float32 for sums
    and products of float16 / bfloat16 (rounded to the input type once, at the end)."""
    _, _, _, out = _reduce_types(dtype, op)
    if op in ("sum", "prod") and out.name in _LOW_OUT:
        return np.dtype(np.float32)
    return out


def _identity(dtype: np.dtype, op: str):
    if op == "sum":
        return 0
    if op == "prod":
        return 1
    if dtype == np.bool_:
        return op == "min"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.max if op == "min" else info.min
    return np.inf if op == "min" else -np.inf


def _reduce_chunk(x, axis=None, keepdims=False, *, op, partial):
    _prepare()
    partial = np.dtype(partial)
    axis = tuple(range(x.ndim)) if axis is None else tuple(axis)
    shape = tuple(1 if d in axis else n for d, n in enumerate(x.shape))
    if math.prod(x.shape[d] for d in axis) == 0:  # an empty chunk: the identity of op
        out = np.full(shape, _identity(partial, op), partial)
    else:
        if x.dtype != partial and op in ("sum", "prod") and partial == np.float32:
            x = x.astype(np.float32)
        out = np.asarray(_reduce(x, axis=axis, op=op)).reshape(shape)
        if out.dtype != partial:
            out = out.astype(partial)
    return out if keepdims else out.reshape(tuple(n for d, n in enumerate(shape) if d not in axis))


def _reduce_combine(x, axis=None, keepdims=False, *, op, partial):
    combine = "sum" if op == "sum" else op  # partial sums add, products multiply, min / max of minima / maxima
    return _reduce_chunk(x, axis, keepdims, op=combine, partial=partial)


def _reduce_aggregate(x, axis=None, keepdims=False, *, op, partial, out):
    r = _reduce_combine(x, axis, keepdims, op=op, partial=partial)
    return r.astype(out) if r.dtype != np.dtype(out) else r


def reduce(a, axis: int | tuple[int, ...] | None = None, op: str = "sum", *,
           split_every: int | dict | None = None) -> da.Array:
    """The reduction `op` (sum, prod, min, max) of the dask array `a` over `axis` (None: all; an
    int; a tuple), with coopjit.reduce's dtypes and NaN rules: coopjit kernels reduce each chunk,
    and the chunks' partial results are combined by coopjit kernels in a tree (dask.array's
    reduction, fan-in `split_every`: an int >= 2, or {axis: int >= 2}). Sums and products of
    float16 / bfloat16 carry float32 partial results between chunks. min / max over no elements
    raise ValueError here, as NumPy does."""
    if op not in OPS:
        raise ValueError(f"reduce: unknown op {op!r}; known: {', '.join(OPS)}")
    a = _as_dask(a, "a")
    if axis is not None and not (isinstance(axis, (int, np.integer)) and not isinstance(axis, bool)) and not (
            isinstance(axis, tuple) and all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in axis)):
        raise TypeError(f"reduce: axis must be None, an int or a tuple of ints, got {axis!r}")
    axes = tuple(range(a.ndim)) if axis is None else np.lib.array_utils.normalize_axis_tuple(axis, a.ndim)
    split_every = _check_reduce_split(split_every, a.ndim)
    dtype = native_dtype(a.dtype)
    if dtype != a.dtype:
        a = a.astype(dtype)
    _, _, _, out_dtype = _reduce_types(dtype, op)
    partial = _partial_dtype(dtype, op)
    n_red = math.prod(a.shape[d] for d in axes)
    if n_red == 0 and op in ("min", "max"):
        raise ValueError(f"zero-size array to reduction operation {'minimum' if op == 'min' else 'maximum'} "
                         f"which has no identity (shape {a.shape}, axis {axis})")
    from functools import partial as bind

    out_nd = a.ndim - len(axes)
    return da.reduction(a, bind(_reduce_chunk, op=op, partial=partial),
                        bind(_reduce_aggregate, op=op, partial=partial,
                             out=out_dtype),
                        combine=bind(_reduce_combine, op=op, partial=partial),
                        axis=axes, keepdims=False, dtype=out_dtype, split_every=split_every, concatenate=True,
                        meta=np.empty((0,) * out_nd, out_dtype), name=f"coopjit-reduce-{op}")


# ---------------------------------------------------------------------------------------------
# tuning sweeps


_PROBLEM_KEYS = ("shape", "dtype", "trans_a", "trans_b", "accumulate", "budget", "max_candidates", "min_time", "seed")


def _dtype_name(dt) -> str:
    return as_dtype(dt, "tune: dtype").name


def _dtype_of(name: str) -> np.dtype:
    return as_dtype(name, "tune: dtype")  # (bfloat16, float8: ml_dtypes' types, by name too)


def _problems(problems, defaults: dict) -> list[dict]:
    """Each problem as the keyword arguments of coopjit.tune (shape as (M, N, K), dtype by name),
    checked here, before anything is sent to a worker."""
    from ._tune import _parse_shape

    if isinstance(problems, (str, dict)) or (isinstance(problems, tuple) and len(problems) == 3
                                              and all(isinstance(v, (int, np.integer)) for v in problems)):
        problems = [problems]
    try:
        items = list(problems)
    except TypeError:
        raise TypeError(f"tune: problems must be a list of shapes ('MxNxK' or (M, N, K)) or dicts of tune's "
                        f"arguments, got {problems!r}") from None
    if not items:
        raise ValueError("tune: no problems to tune")
    out = []
    for p in items:
        spec = dict(defaults)
        if isinstance(p, dict):
            unknown = set(p) - set(_PROBLEM_KEYS)
            if unknown:
                raise ValueError(f"tune: unknown problem field(s) {sorted(unknown)}; known: {', '.join(_PROBLEM_KEYS)}")
            if "shape" not in p:
                raise ValueError(f"tune: a problem given as a dict needs 'shape', got {p!r}")
            spec.update({k: v for k, v in p.items() if v is not None or k == "max_candidates"})
        else:
            spec["shape"] = p
        spec["shape"] = _parse_shape(spec["shape"])
        dt = np.dtype(np.float32) if spec.get("dtype") is None else _dtype_of(spec["dtype"])
        gemm_types(dt, dt)  # TypeError for what GEMM does not take
        spec["dtype"] = dt.name
        out.append(spec)
    return out


class _EventBar:
    """The progress 'bar' of a tuning run on a worker: each candidate becomes an event on the
    sweep's topic, which the client's bar shows."""

    def __init__(self, report, topic: str, index: int, host: str):
        from distributed import get_worker

        self.worker = get_worker()
        self.report, self.topic, self.index, self.host = report, topic, index, host
        self.n = 0

    def _send(self, state: str) -> None:
        best = self.report.best()
        p = self.report.problem
        self.worker.log_event(self.topic, {"index": self.index, "host": self.host, "state": state, "candidates": self.n,
                                           "problem": f"{p['m']}x{p['n']}x{p['k']} {p['dtype']}",
                                           "best_ms": None if best is None else best["median_s"] * 1e3})

    def update(self, k: int = 1) -> None:
        self.n += k
        self._send("running")

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        self._send("confirmed")


def _fresh_pool() -> int:
    """The pool a new process on this machine would have: COOPJIT_NUM_THREADS, else the CPUs
    of the affinity mask."""
    env = os.environ.get("COOPJIT_NUM_THREADS", "")
    if env.strip().isdigit() and int(env) >= 1:
        return min(int(env), _core.max_threads)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _tune_task(index: int, spec: dict, threads: int | None, topic: str | None, device: str, save: bool) -> dict:
    """One problem, tuned on the worker that runs this, while it holds its machine's lock."""
    from distributed import Lock, get_worker

    from ._tune import tune as tune_one

    worker = get_worker()
    host = socket.gethostname()
    kwargs = dict(spec)
    kwargs["shape"] = tuple(kwargs["shape"])
    kwargs["dtype"] = _dtype_of(kwargs["dtype"])
    with Lock(f"coopjit-tune-host-{host}"):
        old = _core.get_num_threads()
        pool = threads or _fresh_pool()
        _core.set_num_threads(pool)
        start = time.time()
        try:
            progress = (lambda report, _max: _EventBar(report, topic, index, host)) if topic else False
            report = tune_one(device=device, progress=progress, save=save, **kwargs)
        finally:
            _core.set_num_threads(old)
            end = time.time()
    sig = report.problem["signature"]
    entry = _tunedb.lookup(sig, device) if report.stored else None
    return {"index": index, "report": report, "key": _tunedb.key(sig, device), "entry": entry,
            "worker": worker.address, "host": host, "machine": _tunedb.machine(), "threads": pool,
            "interval": (start, end)}


def _merge_here(records: dict) -> int:
    """Merges tuned entries into this process's tuning database (a worker's, via client.run)."""
    return _tunedb.merge(records)


def tune(problems, client, *, dtype=None, trans_a: bool = False, trans_b: bool = False, accumulate: bool = False,
         device: str | None = None, budget: float = 60.0, max_candidates: int | None = None, progress: bool = True,
         save: bool = True, min_time: float = 0.05, seed: int = 0, threads: int | None = None) -> list:
    """Tunes a list of GEMM problems on the workers of a dask.distributed cluster (`client`: a
    distributed.Client, or a scheduler address to connect to).

    `problems`: shapes ("MxNxK" or (M, N, K)) or dicts of coopjit.tune's arguments (shape,
    dtype, trans_a, trans_b, accumulate, budget, max_candidates, min_time, seed); the keyword
    arguments are the defaults of every problem. Each problem is tuned by coopjit.tune on one
    worker, while that worker holds its machine's lock (a distributed.Lock named after the host):
    no two timings share a machine's cores. `threads`: coopjit's pool during the timings (None:
    what a new process on that machine has, its CPUs or COOPJIT_NUM_THREADS; the winners are
    keyed by that pool size as the planner keys problems: threads=1 tunes the chunk kernels of
    coopjit.dask's tasks, which run on one thread each). With `save`, each winner, keyed by its
    worker's CPU, is merged into this process's tuning database and into every worker's, so that
    every machine of that CPU uses it. `progress`: a bar of the problems, showing each
    worker's candidates as they are timed. Returns the TuneReports in the order of `problems`,
    each with .worker, .host, .machine and .threads set.
    """
    from .devices import check_device

    device = check_device(device)
    from ._tune import check_limits

    check_limits(budget, max_candidates)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer))
                                or not 1 <= threads <= _core.max_threads):
        raise ValueError(f"tune: threads must be an int in [1, {_core.max_threads}] or None, got {threads!r}")
    defaults = {"dtype": None if dtype is None else _dtype_name(dtype), "trans_a": bool(trans_a),
                "trans_b": bool(trans_b), "accumulate": bool(accumulate), "budget": float(budget),
                "max_candidates": max_candidates, "min_time": float(min_time), "seed": int(seed)}
    specs = _problems(problems, defaults)
    from distributed import Client, as_completed

    own = None
    if isinstance(client, str):
        client = own = Client(client)
    elif not isinstance(client, Client):
        raise TypeError(f"tune: client must be a distributed.Client or a scheduler address, got {client!r}")
    try:
        return _sweep(client, specs, threads, device, save, progress, as_completed)
    finally:
        if own is not None:
            own.close()


def _sweep(client, specs, threads, device, save, progress, as_completed):
    topic = f"coopjit-tune-{uuid.uuid4().hex}" if progress else None
    bar = None
    if progress:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            bar = tqdm(total=len(specs), desc=f"tune sweep ({len(client.nthreads())} workers)", unit="problem")

            def on_event(event):
                msg = event[1]
                best = msg["best_ms"]
                bar.set_postfix_str(f"{msg['host']}: {msg['problem']}, {msg['candidates']} plans"
                                    + ("" if best is None else f", best {best:.3f} ms"))

            client.subscribe_topic(topic, on_event)
    futures = [client.submit(_tune_task, i, spec, threads, topic if bar is not None else None, device, save,
                             pure=False, key=f"coopjit-tune-{i}-{uuid.uuid4().hex[:8]}")
               for i, spec in enumerate(specs)]
    results = [None] * len(specs)
    try:
        for fut in as_completed(futures):
            res = fut.result()
            results[res["index"]] = res
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            client.unsubscribe_topic(topic)
            bar.close()
    if save:
        records = {r["key"]: r["entry"] for r in results if r["entry"] is not None}
        if records:
            _tunedb.merge(records)
            client.run(_merge_here, records)
    reports = []
    for r in results:
        rep = r["report"]
        rep.worker, rep.host, rep.machine, rep.threads = r["worker"], r["host"], r["machine"], r["threads"]
        rep.interval = r["interval"]
        reports.append(rep)
    return reports
