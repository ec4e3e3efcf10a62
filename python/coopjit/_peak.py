"""coopjit.peak(): the machine's measured peaks (f32 FMA, BF16 dot, AMX bf16 and int8, copy bandwidth), once per process."""
from __future__ import annotations

import copy

from . import _core

_cache: dict | None = None


def peak(*, refresh: bool = False, seconds: float = 0.1) -> dict:
    """The host's peak throughput, measured by microbenchmarks coopjit JIT-compiles for this CPU.

    Returns {"cpu": name, "threads": n, "f32_fma": {...}, "bf16_dot": {...}, "amx_bf16": {...}, "amx_int8": {...},
    "copy": {...}}; each entry has "unit" (GFLOP/s, GOP/s for AMX int8, or GB/s), "single" (one thread), "all" (one
    thread per core of the affinity mask), "threads" and "note" (what was measured). "single"
    and "all" are None where the CPU lacks the unit (the note says so, e.g. "no AMX on this CPU").
    Copy bandwidth counts the bytes read plus the bytes written. The first call takes a few
    seconds; later calls return the cached result unless `refresh`.
    """
    global _cache
    if _cache is None or refresh:
        result = {"cpu": _core.cpu_info()["name"]}
        for name in _core.peak_names():
            result[name] = dict(_core.measure_peak(name, seconds))
        result["threads"] = result["f32_fma"]["threads"]
        _cache = result
    return copy.deepcopy(_cache)
