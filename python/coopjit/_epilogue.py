"""Fused GEMM epilogues: the keyword arguments of matmul / gemm / compile_gemm checked and turned
into what the core's kernels take (cpp/spec/gemm_spec.h, GemmEpilogue).

Order of the steps, as cuBLASLt and oneDNN apply them, once per output element, in the kernel,
before C is written once:

    y = alpha * (a @ b) * scale[n] * row_scale[m]  (+ beta * c, gemm only)  + bias
    y = activation(y);  y = y + residual[m, n];  y = epilogue(builder, m, n, y)
    c = y converted to the output dtype

Everything is computed in float32 (float64 for a float64 product); an int8 / uint8 product's
int32 sums are converted to float32 first (the W8A8 case: int8 weights and activations, a
per-column dequantization scale, a float32 / bfloat16 / float16 output).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._arrays import as_array, as_dtype, native_dtype

def _device(x, sync: bool = True):
    from ._cuda_arrays import device_view

    return device_view(x, sync)


ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh")
_OUT_NAMES = {"float32": "f32", "float64": "f64", "bfloat16": "bf16", "float16": "f16"}
#: The keyword arguments that make a product fused (out_dtype alone converts only).
STEP_ARGS = ("bias", "activation", "residual", "scale", "row_scale", "epilogue")


class Epilogue:
    """The checked steps of one fused product: `steps` for the core (a dict), the compute dtype
    `etype`, and the output dtype `out_dtype`."""

    def __init__(self, where: str, a_dtype: np.dtype, b_dtype: np.dtype, m: int, n: int, *, bias=None, bias_axis=1,
                 activation=None, residual=None, scale=None, row_scale=None, epilogue=None, out_dtype=None,
                 bind_arrays: bool = True, sync: bool = True, keep: bool = False) -> None:
        self.where = where
        # whether a torch CUDA operand's stream is synchronized when it is read (sync=False: the
        # caller orders the launch after it, as _gemm_fused._device_product does)
        self.sync = sync
        self.m, self.n = m, n
        a_dtype, b_dtype = native_dtype(a_dtype), native_dtype(b_dtype)
        self.etype, default, allowed = fused_out_types(a_dtype, b_dtype)
        self.out_dtype = default if out_dtype is None else self._out_dtype(out_dtype)
        if self.out_dtype.name not in allowed:
            names = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
            # (out_dtype alone converts only: a plain product, not a fused one, which the message says)
            fused = any(x is not None for x in (bias, activation, residual, scale, row_scale, epilogue))
            raise TypeError(f"{where}: a {'fused ' if fused else ''}{a_dtype} x {b_dtype} product writes {names}, "
                            f"not out_dtype={self.out_dtype}")
        if bias_axis not in (0, 1, -1, -2) or isinstance(bias_axis, bool):
            raise ValueError(f"{where}: bias_axis must be 1 (a bias of N values, one per column; the default) or 0 "
                             f"(M values, one per row), got {bias_axis!r}")
        self.bias_axis = 1 if bias_axis in (1, -1) else 0
        if activation is not None:
            if not isinstance(activation, str):
                raise TypeError(f"{where}: activation must be one of {', '.join(map(repr, ACTIVATIONS))}, got "
                                f"{activation!r}")
            if activation not in ACTIVATIONS:
                raise ValueError(f"{where}: unknown activation {activation!r} (known: {', '.join(ACTIVATIONS)})")
        if epilogue is not None and not callable(epilogue):
            raise TypeError(f"{where}: epilogue must be a function (builder, row, col, value) -> value, as "
                            f"KernelBuilder.per_element takes, got {epilogue!r}")
        self.activation = activation
        self.fn = epilogue
        # Which array steps there are; their values (bound: compile_gemm's arrays given up front).
        self.has = {"scale": scale is not None and scale is not False, "row_scale": row_scale is not None and
                    row_scale is not False, "bias": bias is not None and bias is not False,
                    "residual": residual is not None and residual is not False}
        # `keep` (compile_gemm: the kernel keeps them for its calls): the arrays are copies made
        # here, so that a caller who changes an array later does not change the kernel's results.
        # A float32 bias of a float32 kernel was kept as the caller's array (a view) where a float64
        # one was converted (a copy): writes to it showed in one case and not the other.
        self.bound = {}
        for name, value, length in (("scale", scale, n), ("row_scale", row_scale, m),
                                    ("bias", bias, n if self.bias_axis == 1 else m)):
            if self.has[name] and value is not True:
                value = self._kept(name, value) if keep else value
                self.bound[name] = self.vector(name, value, length) if bind_arrays else value
        if self.has["residual"] and residual is not True:
            self.bound["residual"] = self._kept("residual", residual) if keep else residual

    def _kept(self, name: str, value: Any):
        """A copy of `value`, an operand a compiled kernel keeps: host arrays (and scalars, lists,
        torch CPU tensors) as a NumPy copy; CUDA device arrays by their own framework, on its
        current stream (torch: .clone(); CuPy: .copy(); coopjit.DeviceArray: a new one). Another
        __cuda_array_interface__ object, which coopjit has no copy for: ValueError naming it."""
        dv = _device(value, self.sync)
        if dv is None:
            return np.array(as_array(value, name), copy=True)
        mod = type(value).__module__.partition(".")[0]
        if mod == "torch" and hasattr(value, "clone"):
            return value.detach().clone()
        if mod == "cupy" and hasattr(value, "copy"):
            return value.copy()
        from ._cuda_arrays import DeviceArray

        if isinstance(value, DeviceArray):
            return DeviceArray.from_host(value.numpy(), value.device)
        raise ValueError(f"{self.where}: {name} is a {type(value).__name__} ({dv.dtype} {dv.shape} on {dv.device}) "
                         f"that coopjit cannot copy: a compiled kernel keeps a copy of each array it is compiled with, "
                         f"made by the array's framework (torch tensors, CuPy arrays, coopjit.DeviceArray); pass "
                         f"{name}=True and give the array at each call instead")

    def _out_dtype(self, d) -> np.dtype:
        return native_dtype(as_dtype(d, f"{self.where}: out_dtype"))

    @property
    def fused(self) -> bool:
        """Any step besides the output type."""
        return any(self.has.values()) or self.activation is not None or self.fn is not None

    def vector(self, name: str, value: Any, length: int) -> np.ndarray:
        """A contiguous vector of `length` values in the compute dtype (a scalar is repeated); a
        CUDA device array is taken as it is (it must be exactly that)."""
        dv = _device(value, self.sync)
        if dv is not None:
            if dv.dtype != self.etype or dv.shape != (length,) or not dv.c_contiguous:
                raise ValueError(f"{self.where}: {name} on the device must be a contiguous {self.etype} vector of "
                                 f"{length} values, got {dv.dtype} {dv.shape} with byte strides {dv.strides}")
            return dv
        v = as_array(value, name)
        if v.dtype.kind not in "biuf" and v.dtype.name not in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            raise TypeError(f"{self.where}: {name} has dtype {v.dtype}; it must hold numbers")
        if v.ndim > 1 or (v.ndim == 1 and v.shape[0] not in (1, length)):
            what = "column (N)" if name == "scale" or (name == "bias" and self.bias_axis == 1) else "row (M)"
            hint = " (bias_axis=0 takes a vector of M)" if name == "bias" and self.bias_axis == 1 and v.ndim == 1 \
                and v.shape[0] == self.m else ""
            raise ValueError(f"{self.where}: {name} has shape {v.shape}; it must be a vector of {length} values, one "
                             f"per {what}{hint}")
        return np.ascontiguousarray(np.broadcast_to(v.astype(self.etype, copy=False), (length,)))

    def residual_like(self, target: np.ndarray, residual: Any) -> np.ndarray:
        """The residual broadcast to the (C-contiguous) output `target`, in the compute dtype, with
        target's element strides (what the kernel reads it with). A CUDA device array is taken as it
        is (it must be exactly that: the target's shape, C order, the compute dtype)."""
        dv = _device(residual, self.sync)
        if dv is not None:
            if dv.dtype != self.etype or dv.shape != tuple(target.shape) or not dv.c_contiguous:
                raise ValueError(f"{self.where}: a residual on the device must be a C-contiguous {self.etype} array "
                                 f"of shape {tuple(target.shape)}, got {dv.dtype} {dv.shape}")
            return dv
        r = as_array(residual, "residual")
        if r.dtype.kind not in "biuf" and r.dtype.name not in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            raise TypeError(f"{self.where}: residual has dtype {r.dtype}; it must hold numbers")
        try:
            b = np.broadcast_to(r, target.shape)
        except ValueError:
            raise ValueError(f"{self.where}: residual has shape {r.shape}, which does not broadcast to the "
                             f"result's shape {target.shape}") from None
        out = np.empty(target.shape, self.etype)
        out[...] = b
        return out

    def core(self, target: np.ndarray | None, **given) -> dict | None:
        """The dict the core takes for one call: the steps and their operands (`given` overrides
        the bound ones)."""
        d: dict[str, Any] = {"activation": self.activation or "", "bias_axis": self.bias_axis, "fn": self.fn}
        lengths = {"scale": self.n, "row_scale": self.m, "bias": self.n if self.bias_axis == 1 else self.m}
        for name in ("scale", "row_scale", "bias", "residual"):
            value = given.get(name)
            if isinstance(value, (bool, np.bool_)):
                # (True read as the number 1: kern(a, b, residual=True) added 1 to every element)
                raise TypeError(f"{self.where}: {name}={value!r} at a call; pass the {name} itself (an array or a "
                                f"number)")
            if value is not None and not self.has[name]:
                raise ValueError(f"{self.where}: {name}= was given, but this kernel was compiled without it (pass "
                                 f"{name}=True or an array to compile_gemm)")
            if not self.has[name]:
                d[name] = None
                continue
            if value is None:
                value = self.bound.get(name)
            if value is None:
                raise ValueError(f"{self.where}: this kernel was compiled with {name}=True: pass {name}= at each call")
            if name == "residual":
                d[name] = value if target is None else self.residual_like(target, value)
            else:
                v = value if isinstance(value, (np.ndarray,)) and value.dtype == self.etype and value.ndim == 1 \
                    and value.shape[0] == lengths[name] and value.flags.c_contiguous \
                    else self.vector(name, value, lengths[name])
                # A vector in the output's memory (bias=out[0]) would be read while the kernel
                # writes the output over it: read from a copy, as NumPy's ufuncs do with overlaps
                # (session 20's audit: 16x64x32 f32 with bias=out[0] was off by up to 64).
                if isinstance(v, np.ndarray) and isinstance(target, np.ndarray) and np.may_share_memory(v, target):
                    v = v.copy()
                d[name] = v
        return d

    def fold_alpha(self, alpha: float) -> float:
        """alpha of a fused int8 / uint8 product (a float output), as a factor of the scale step
        (added when there is none): the alpha the kernel gets instead (1). The kernels multiply
        their int32 sums by alpha before the epilogue converts them, in int32, which wraps: gemm
        of 64 x 127 * 127 with alpha=4096 and scale= gave -6.7e7 where alpha * (a @ b) * scale is
        4.2e9 (session 24's audit). For a product whose steps are given with it (matmul, gemm)."""
        if alpha == 1.0:
            return alpha
        s = self.bound.get("scale") if self.has["scale"] else None
        if s is not None and not isinstance(s, np.ndarray):  # a CUDA device array: not multiplied here
            raise ValueError(f"{self.where}: alpha={alpha} of an int8 product whose scale is a device array: pass "
                             "alpha * scale as scale (the kernels multiply the int32 sums by alpha, in int32, which "
                             "wraps)")
        self.has["scale"] = True
        self.bound["scale"] = np.full(self.n, alpha, self.etype) if s is None else s * self.etype.type(alpha)
        return 1.0

    def fold_alpha_call(self, alpha: float, given: dict, k: int, a_dtype: np.dtype, b_dtype: np.dtype) -> float:
        """fold_alpha for a compiled kernel's call, whose steps are fixed: alpha goes into the
        call's scale (or row_scale) operand, a copy, `given` updated; a kernel with neither takes
        alpha in int32 when no int32 sum times alpha can wrap (an integer whose |alpha| K max|a b|
        is below 2^31), else ValueError naming alpha and the way to pass it."""
        if alpha == 1.0:
            return alpha
        for name in ("scale", "row_scale"):
            if self.has[name]:
                v = given.get(name)
                v = self.bound.get(name) if v is None else v
                if v is None:
                    return alpha  # (core() says the operand is missing)
                length = self.n if name == "scale" else self.m
                vec = self.vector(name, v, length)
                if not isinstance(vec, np.ndarray):  # a CUDA device array: not multiplied here
                    raise ValueError(f"{self.where}: alpha={alpha} of an int8 product whose {name} is a device array: "
                                     f"pass alpha * {name} as {name} (the kernels multiply the int32 sums by alpha, "
                                     "in int32, which wraps)")
                given[name] = vec * self.etype.type(alpha)
                return 1.0
        top = max(abs(lo) for lo in (np.iinfo(a_dtype).min, np.iinfo(a_dtype).max)) * max(
            abs(lo) for lo in (np.iinfo(b_dtype).min, np.iinfo(b_dtype).max))
        if not float(alpha).is_integer() or abs(alpha) * max(k, 1) * top >= 2.0**31:
            raise ValueError(f"{self.where}: alpha={alpha} of an int8 product with an epilogue multiplies its int32 "
                             f"sums (up to {k} x {top}) in int32, where it could wrap; compile the kernel with "
                             "scale=True (or row_scale=True) and alpha is applied in float")
        return alpha

    def steps(self) -> dict:
        """The steps alone (compile_gemm): presence, the bias axis, the activation, the function."""
        return {"scale": self.has["scale"], "row_scale": self.has["row_scale"], "bias": self.has["bias"] or None,
                "bias_axis": self.bias_axis, "residual": self.has["residual"], "activation": self.activation or "",
                "fn": self.fn}

    def types(self, a_ir: str, b_ir: str) -> list[str]:
        return [a_ir, b_ir, _OUT_NAMES[self.out_dtype.name]]

    def describe(self) -> str:
        parts = [k for k in ("scale", "row_scale") if self.has[k]]
        if self.has["bias"]:
            parts.append("bias (per column)" if self.bias_axis == 1 else "bias (per row)")
        if self.activation:
            parts.append(self.activation)
        if self.has["residual"]:
            parts.append("residual")
        if self.fn is not None:
            parts.append(f"epilogue {getattr(self.fn, '__name__', 'function')}")
        parts.append(f"-> {self.out_dtype}")
        return ", ".join(parts)


def fused_out_types(a_dtype: np.dtype, b_dtype: np.dtype) -> tuple[np.dtype, np.dtype, tuple[str, ...]]:
    """(the compute dtype, the default output dtype, the output dtypes' names) of a fused product of
    (native) a_dtype x b_dtype: float64 computes and writes float64; the others compute in float32
    and write float32, bfloat16 or float16, by default their input type (float32 for int8 / uint8
    and float8)."""
    if a_dtype == np.float64 and b_dtype == np.float64:
        return np.dtype(np.float64), np.dtype(np.float64), ("float64",)
    low = a_dtype.name.startswith("float8") or a_dtype.name in ("int8", "uint8") and b_dtype.name in ("int8", "uint8")
    return np.dtype(np.float32), np.dtype(np.float32) if low else a_dtype, ("float32", "bfloat16", "float16")


def check_operands_given(where: str, kwargs: dict) -> None:
    """matmul / gemm: an epilogue operand of True is compile_gemm's ("an operand at each call");
    here it reached the core as no operand ("this kernel was compiled with bias=True: pass bias= at
    each call", of a product that compiled nothing the user asked for). TypeError naming it."""
    for name in ("bias", "residual", "scale", "row_scale"):
        value = kwargs.get(name)
        if isinstance(value, (bool, np.bool_)) and value:
            raise TypeError(f"{where}: {name}=True is compile_gemm's (a kernel that takes {name}= at each call); "
                            f"pass the {name} itself (an array or a number)")


def requested(kwargs: dict) -> bool:
    """Whether any epilogue keyword (or out_dtype) was given a value."""
    return any(v is not None and v is not False for v in kwargs.values())


__all__ = ["ACTIVATIONS", "Epilogue", "STEP_ARGS", "check_operands_given", "fused_out_types", "requested"]
