"""The persistent caches (compiled kernels and the tuning database): where they live, what they hold, clearing them.

The directory is COOPJIT_CACHE_DIR when set, else the user cache directory (platformdirs:
~/.cache/coopjit on Linux); COOPJIT_CACHE=0 (or off, false, no) disables both caches;
COOPJIT_CACHE_MAX_MB (1024 by default) bounds the stored kernels (least recently used go first).
"""
from __future__ import annotations

import os

from . import _core, _tunedb

_OFF = ("0", "off", "false", "no")


def default_directory() -> str | None:
    """The directory the environment asks for, or None when it disables the cache."""
    if os.environ.get("COOPJIT_CACHE", "").strip().lower() in _OFF:
        return None
    d = os.environ.get("COOPJIT_CACHE_DIR")
    if d:
        return os.path.abspath(os.path.expanduser(d))
    try:
        import platformdirs

        return platformdirs.user_cache_dir("coopjit", appauthor=False)
    except ImportError:  # platformdirs is a dependency; this keeps a broken install working
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(base, "coopjit")


def set_directory(path: str | os.PathLike | None) -> None:
    """Moves both caches to `path` for the rest of this process (None disables them); the
    tuned plans of the new directory's database replace those loaded so far."""
    d = "" if path is None else os.fsdecode(os.fspath(path))
    if path is not None:
        # Checked before anything moves: "" would be the current directory (os.path.abspath), and
        # the core's C strings would end a path at a NUL (a folder named by the part before it).
        if not d:
            raise ValueError("cache.set_directory: the cache directory must be a path, got '' (None disables the "
                             "caches)")
        if "\0" in d:
            raise ValueError(f"cache.set_directory: the cache directory {d!r} contains a NUL character")
        d = os.path.abspath(d)
    _core.set_cache_dir(d)
    _tunedb.reload()


def directory() -> str | None:
    """The cache directory, or None when the caches are disabled."""
    return _core.cache_dir() or None


def info() -> dict:
    """What the caches hold: the directory, kernel entries (count, bytes, per kind), tuned
    problems, and this process's counters (compiles, disk loads, rejected entries, ...)."""
    disk = _core.disk_cache_info()
    mem = _core.cache_stats()
    return {
        "directory": directory(),
        "enabled": directory() is not None,
        "identity": _core.cache_identity(),
        "kernels": {"entries": disk["entries"], "bytes": disk["bytes"], "kinds": dict(disk["kinds"])},
        "tuning": {"path": _tunedb.path(), "entries": len(_tunedb.entries())},
        "process": {
            "compiles": mem["compiles"],
            "disk_loads": mem["disk_loads"],
            "memory_hits": mem["hits"],
            **{k: disk[k] for k in ("stores", "rejected", "write_errors", "lock_waits", "lock_timeouts", "evicted")},
        },
    }


def clear(kernels: bool = True, tuning: bool = True, memory: bool = True) -> dict:
    """Deletes the stored kernels (`kernels`) and/or the tuning database (`tuning`), and forgets
    the kernels and plans this process holds in memory (`memory`: later calls plan, and load or
    compile, again); returns how many of each went. Kernels already handed out (a Kernel object,
    a call running in another thread) keep working: their code stays mapped. Tuned plans are
    forgotten at once."""
    out = {"kernels": 0, "tuning": 0, "memory": 0}
    if kernels:
        out["kernels"] = _core.disk_cache_clear()
    if tuning:
        out["tuning"] = _tunedb.clear()
    if memory:
        out["memory"] = int(_core.cache_stats()["entries"])
        _core.cache_clear()
    from ._log import logger

    logger.info("cache cleared: %d stored kernels, %d tuned problems, %d kernels in memory", out["kernels"], out["tuning"],
                out["memory"])
    return out


def _configure() -> None:
    """At import: the directory from the environment, and the tuned plans it holds."""
    d = default_directory()
    _core.set_cache_dir(d or "")
    _tunedb.reload()
