"""What every device's GEMM kernels share: plan= overrides as the core takes them (the CPU's
fields and the devices'), and the checks of a compiled kernel's call arguments. Below the device
implementations (_cpu, _gpu) and the public functions (_gemm); imports nothing of either."""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._arrays import as_array, beta_without_c, check_own_elements, check_scalar, gemm_types, int_scalar, native_dtype, native_order
from ._plan import Plan

_LAYOUTS = {"row": 0, "col": 1}
_SPLITS = {"dp": 0, "sk": 1, "sk+dp": 2, "dp+sk": 3}  # dp+sk: GPU plans only
_ORDERS = {"m_inner": 0, "k_outer": 1, "dot": 2}  # the tile walk (plan field order)
PLAN_FIELDS = ("layout", "simd_width", "mr", "nr", "kb", "kt", "threads", "split", "pack", "prepacked_b", "vnni", "amx", "amx_feed", "amx_prefetch", "amx_store", "demote", "cycles", "c_prefetch", "direct_a", "inline_b", "own_a", "k_inner", "nc_tiles", "b_prefetch", "mc_tiles",
               "fixed", "order", "grid_m", "shares", "ksplit")


def _plan_fields(plan: dict | None, known: tuple, flags: tuple = (), modes: tuple = (), where: str = "") -> dict:
    """Plan overrides as the core takes them: layout and split by name, `flags` as 0/1, `modes` by
    name ('no' / 'yes' / 'emulated') or number, the other `known` fields as ints."""
    out = {}
    if plan is None:
        return out
    if isinstance(plan, Plan):  # a kernel's config: its choices, not the facts of its problem
        plan = plan.overrides()
    if not isinstance(plan, Mapping):
        raise TypeError(f"plan must be a dict of plan fields (for example {{'mr': 6, 'split': 'dp'}}) or a kernel's "
                        f".config; known fields: {', '.join(known)}; got {type(plan).__name__} {plan!r}")
    for key, value in plan.items():
        if not isinstance(key, str):
            raise TypeError(f"plan field names are strings, got {key!r}; known: {', '.join(known)}")
        if key not in known:
            raise ValueError(f"unknown plan field {key!r}{where}; known: {', '.join(known)}")
        if key in ("layout", "split") or (key == "order" and "order" in known):
            names = {"layout": _LAYOUTS, "split": _SPLITS, "order": _ORDERS}[key]
            allowed = "'row' or 'col'" if key == "layout" else f"one of {', '.join(names)}"
            if not isinstance(value, str):
                raise TypeError(f"plan {key} must be {allowed} (a str), got {value!r}")
            if value not in names:
                raise ValueError(f"plan {key} must be {allowed}, got {value!r}")
            out[key] = names[value]
        elif key in modes and isinstance(value, str):
            if value not in _GPU_MODES:
                raise ValueError(f"plan {key} must be one of {', '.join(map(repr, _GPU_MODES))}, got {value!r}")
            out[key] = _GPU_MODES[value]
        elif key in modes and (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))):
            # (amx=True read "plan amx must be an int", which it need not be)
            raise TypeError(f"plan {key} must be one of {', '.join(map(repr, _GPU_MODES))} (or 0 / 1 / 2), "
                            f"got {value!r} ({type(value).__name__})")
        elif key in flags:
            if not isinstance(value, (bool, np.bool_, int, np.integer)):
                raise TypeError(f"plan {key} must be True or False, got {value!r}")
            if value not in (0, 1):
                raise ValueError(f"plan {key} must be True or False (or 0 / 1), got {value!r}")
            out[key] = int(value)
        else:
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"plan {key} must be an int, got {value!r} ({type(value).__name__})")
            if not -2**63 <= int(value) < 2**63:
                raise ValueError(f"plan {key}={value} is out of range")
            out[key] = int(value)
    return out


_MEMO_LIMIT = 1024


def _content(plan) -> tuple:
    """The key of a plan= that is not None: its type, its target (a kernel's config: a Plan drops
    the facts of its problem) and its fields' names, types and values in order. The types are in
    it because equal values of other types are taken differently (mr=True is refused, mr=1 taken).
    AttributeError / TypeError (from hashing it) when plan is not a mapping of hashable values."""
    return type(plan), getattr(plan, "target", None), tuple((f, type(v), v) for f, v in plan.items())


def plan_key(plan):
    """plan= as (a part of) a key (_content): () without one; None when it is not a mapping of
    hashable values (the caller's full path says what is wrong). coopjit._cuda_fast's cached
    launches are keyed on it; the memo below uses the same content."""
    if plan is None:
        return ()
    try:
        key = _content(plan)
        hash(key)
    except (AttributeError, TypeError):
        return None
    return key


def _memoized(memo: dict, plan, convert) -> dict:
    """convert(plan) (the overrides as the core takes them), remembered by the plan's content
    (_content, as plan_key; hashed once, by the lookup). A call with plan= (a kernel's whole
    .config, say) checked and converted each field at every call, 10-30 us of a 64^3 product's 3.
    Plans that are not mappings of hashable values, and refused plans, are not remembered: convert
    says what is wrong with them every time. A copy is returned: the caller may change it."""
    if plan is None:
        return {}
    try:
        key = _content(plan)
        got = memo.get(key)
    except (AttributeError, TypeError):
        return convert(plan)
    if got is None:
        got = convert(plan)
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        memo[key] = got
    return dict(got)


_CPU_MEMO: dict = {}


def _overrides(plan: dict | None) -> dict:
    """Plan overrides as the core takes them, from {'layout': 'row'|'col', 'split': 'dp'|'sk'|'sk+dp',
    'mr': 8, 'nr': 32, 'kb': 4, 'kt': 256, 'threads': 2, 'vnni': 1|2|4, 'amx': 'no'|'yes'|'emulated',
    'mc_tiles': 8, 'pack': bool}."""
    return _memoized(_CPU_MEMO, plan, _cpu_fields)


def _cpu_fields(plan) -> dict:
    if isinstance(plan, Plan) and plan.target != "cpu":
        raise ValueError("plan is the config of a GPU kernel; a CPU product takes a CPU kernel's config (or a dict)")
    out = _plan_fields(plan, PLAN_FIELDS, flags=("pack", "prepacked_b", "fixed", "amx_store", "demote", "cycles", "c_prefetch", "direct_a", "inline_b", "own_a", "k_inner"), modes=("amx",))
    if out.get("split") == _SPLITS["dp+sk"]:  # (the core said "plan override split=3 must be 0 (dp), ...")
        raise ValueError("plan split 'dp+sk' is for device plans; a CPU product takes 'dp', 'sk' or 'sk+dp'")
    return out


_GPU_FIELDS = ("layout", "subgroup_size", "mr", "nr", "kb", "sg_m", "sg_n", "dpas", "block2d", "mma", "split", "kt",
               "workers", "stages", "wgmma", "tma", "ws", "group_m", "kmajor", "epi_smem", "epi_alias", "tma_store", "persistent",
               "sk_flags", "sk_down", "sk_trace", "sk_prefetch", "sk_stage", "sk_stage_store", "sk_one_release", "sk_pair", "cluster")
_GPU_MODES = {"no": 0, "yes": 1, "emulated": 2}  # dpas, block2d


def _gpu_overrides(plan: dict | None) -> dict:
    """Plan overrides for SPIR-V devices: {'layout': 'row'|'col', 'subgroup_size': 16, 'mr': 32,
    'nr': 32, 'kb': 8, 'sg_m': 2, 'sg_n': 2, 'dpas': 'no'|'yes'|'emulated', 'block2d': the same,
    'mma': 'no'|'yes' (NVIDIA tensor cores), 'stages': 0 (no) or 2..8 (the tensor-core pipeline's K steps in flight),
    'wgmma': 'no'|'yes' (Hopper's warpgroup pipeline, sm_90), 'tma': 'no'|'yes' (its panels through the Tensor Memory
    Accelerator), 'ws': 'no'|'yes'|2 (a TMA producer warp, 2: a producer warpgroup with setmaxnreg, and wgmma consumer
    warpgroups; one tile a block), 'group_m': 0 (tiles walk down M) or bands of that many M tiles, 'kmajor': 'no'|'yes'
    (int8 operands contiguous along M / N copied K-major first, for wgmma; sm_90), 'epi_smem': 'no'|'yes' (wgmma plans: the
    epilogue staged through shared memory, C written in 16-byte chunks), 'epi_alias': 'no'|'yes' (ws plans of one tile a
    block: that staging in the pipeline's stage slots, so that they can be one more), 'tma_store': 'no'|'yes'|2 (wgmma TMA plans: C
    written from that staging by TMA stores, from a tensor map for C; 2: boxes of a warpgroup where they apply), 'persistent': 'no'|'yes' (ws plans: a grid of
    min(tiles, SMs) blocks walking the tiles), 'sk_flags': 'no'|'yes' (ws Stream-K plans: the split tiles' parts
    added in the kernel after flags, where the grid fits the SMs; 'no': a fix-up launch), 'sk_down': 'no'|'yes' (ws Stream-K
    plans: each Stream-K part's K tiles from its last down to its first), 'sk_trace': 'no'|'yes' (debug, sk_flags plans:
    the consumer warps' clock at each unit's boundaries, after the flags; _core.gpu_stream_k_flags reads it), 'sk_prefetch': 'no'|'yes' (sk_flags plans: the successor's partial tile
    prefetched into L2 by the producer), 'sk_stage': 'no'|'yes' (sk_flags plans: the successor's partial read through
    the pipeline's stage slots by cp.async), 'sk_stage_store': 'no'|'yes'|2 (sk_flags plans: the partial for the
    predecessor written through the stage slots and stored by the producer; 2: a bulk group a slot), 'sk_one_release': 'no'|'yes' (sk_flags plans: each flag set by one
    work-item of the warp after a warp barrier), 'sk_pair': 'no'|'yes' (sk_stage plans: blocks in clusters of 2 passing the
    partial of the tile they share through distributed shared memory instead of the workspace), 'cluster': 'no'|2 (ws DP plans: pairs of blocks
    sharing B's panels, multicast by TMA), 'split': 'dp'|'sk'|'sk+dp', 'kt': 64,
    'workers': 32}
    ('emulated': the instructions' operands as on hardware, the instructions computed from their
    specification, so that the kernel runs on devices without them)."""
    return _memoized(_GPU_MEMO, plan, _gpu_fields)


_GPU_MEMO: dict = {}


def _gpu_fields(plan) -> dict:
    if isinstance(plan, Plan) and plan.target != "gpu":
        raise ValueError("plan is the config of a CPU kernel; a device product takes a device kernel's config (or a dict)")
    return _plan_fields(plan, _GPU_FIELDS, modes=("dpas", "block2d", "mma", "wgmma", "tma", "ws", "kmajor", "epi_smem", "epi_alias", "tma_store",
                                                            "persistent", "sk_flags", "sk_down", "sk_trace", "sk_prefetch", "sk_stage", "sk_stage_store", "sk_one_release", "sk_pair", "cluster"),
                        where=" for a GPU device")



def kernel_types(dtype, out_dtype, fused):
    """(IR types of a, b, c; the output dtype) of a compiled kernel of one dtype (CPU and device
    kernels alike): the epilogue's (`fused`, a coopjit._epilogue.Epilogue, or None) output type
    when it has one."""
    if fused is None:
        return gemm_types(dtype, dtype, out_dtype)
    (ta, tb, _), _ = gemm_types(dtype, dtype)
    return fused.types(ta, tb), fused.out_dtype


def check_beta(kern, has_c: bool, beta: float) -> None:
    """beta of a compiled kernel's call (CPU and device kernels alike): 0 unless the kernel was
    compiled with accumulate=True and c is given (beta * c is added to the product). Without c a
    beta was ignored: kern(a, b, beta=1) gave a @ b as though beta were 0 (session 22's audit)."""
    if beta == 0.0:
        return
    if not kern.accumulate:
        raise ValueError(f"beta={beta} needs a kernel compiled with accumulate=True")
    if not has_c:
        beta_without_c("", beta)


def check_kernel_call(kern, a, b, c, alpha, beta):
    """The arguments of a compiled GEMM kernel's call, checked against the problem it was compiled
    for (CPU and device kernels alike): (a, b, c, alpha, beta), c allocated when None."""
    a = native_order(as_array(a, "a"))
    b = native_order(as_array(b, "b"))
    if np.dtype(kern.dtype).kind in "iu":  # int32 accumulators: integers taken exactly
        alpha, beta = int_scalar(alpha, "alpha"), int_scalar(beta, "beta")
    else:
        alpha, beta = check_scalar(alpha, "alpha"), check_scalar(beta, "beta")
    ashape = (kern.k, kern.m) if kern.trans_a else (kern.m, kern.k)
    bshape = (kern.n, kern.k) if kern.trans_b else (kern.k, kern.n)
    for name, x, want in (("a", a, ashape), ("b", b, bshape)):
        if x.dtype != kern.dtype:
            raise TypeError(f"{name} has dtype {x.dtype}; this kernel was compiled for {kern.dtype}")
        if x.shape != want:
            raise ValueError(f"{name} has shape {x.shape}; this kernel was compiled for {want}")
    check_beta(kern, c is not None, beta)
    if c is None:
        c = np.empty((kern.m, kern.n), kern.out_dtype)
        beta = 0.0  # (-0.0 stays out of the kernel)
    elif not isinstance(c, np.ndarray) or native_dtype(c.dtype) != kern.out_dtype or c.shape != (kern.m, kern.n):
        raise ValueError(
            f"c must be a {kern.out_dtype} array of shape {(kern.m, kern.n)}, got "
            f"{getattr(c, 'dtype', type(c).__name__)} {getattr(c, 'shape', '')}"
        )
    elif c.flags.writeable:  # (a read-only c: the caller says so)
        check_own_elements(c, "c")
    return a, b, c, alpha, beta
