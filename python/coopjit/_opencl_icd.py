"""Registers Intel's CPU OpenCL runtime (the PyPI wheel intel-opencl-rt) with the system's OpenCL
ICD loader, without root: a private vendors directory (the system's .icd files plus one naming
the wheel's libintelocl.so) in $OCL_ICD_VENDORS, set before the loader first runs.

The wheel installs <prefix>/lib/libintelocl.so and an .icd file that still holds a conda
placeholder path (/opt/anaconda1anaconda2anaconda3), so the loader cannot find it by itself.
Debian 12's loader (ocl-icd 2.3.1) ignores OCL_ICD_FILENAMES and takes OCL_ICD_VENDORS, a
directory or one .icd file; Khronos' loader takes the directory as well.
"""
from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import tempfile
from pathlib import Path

SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")


def intel_cpu_runtime() -> Path | None:
    """The libintelocl.so of the installed intel-opencl-rt wheel, or None."""
    try:
        dist = md.distribution("intel-opencl-rt")
    except md.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.name == "libintelocl.so":
            path = Path(dist.locate_file(f)).resolve()
            if path.is_file():
                return path
    return None


def _registered_system_wide(lib: Path) -> bool:
    if not SYSTEM_VENDORS.is_dir():
        return False
    for icd in SYSTEM_VENDORS.glob("*.icd"):
        try:
            target = icd.read_text().strip()
        except OSError:
            continue
        if Path(target).name == lib.name or target == str(lib):
            return True
    return False


def _vendors_dir(key: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    for root in (Path(base) / "coopjit", Path(tempfile.gettempdir()) / f"coopjit-{os.getuid()}"):
        d = root / f"opencl-vendors-{key}"
        try:
            d.mkdir(parents=True, exist_ok=True)
            return d
        except OSError:
            continue
    raise OSError("no writable cache directory for the OpenCL vendors list")


def register() -> str | None:
    """Points $OCL_ICD_VENDORS at a directory listing the system's ICDs plus Intel's CPU runtime.

    Does nothing (returns None) when the user set OCL_ICD_VENDORS or OCL_ICD_FILENAMES, when the
    wheel is absent, or when /etc/OpenCL/vendors already names libintelocl.so. Returns the directory.
    """
    if os.environ.get("OCL_ICD_VENDORS") or os.environ.get("OCL_ICD_FILENAMES"):
        return None
    lib = intel_cpu_runtime()
    if lib is None or _registered_system_wide(lib):
        return None
    icds = {"coopjit-intel-cpu.icd": f"{lib}\n"}
    if SYSTEM_VENDORS.is_dir():
        for icd in sorted(SYSTEM_VENDORS.glob("*.icd")):
            try:
                icds[icd.name] = icd.read_text()
            except OSError:
                pass
    key = hashlib.sha256(repr(sorted(icds.items())).encode()).hexdigest()[:16]
    try:
        d = _vendors_dir(key)
        for name, text in icds.items():
            f = d / name
            if not f.exists() or f.read_text() != text:
                tmp = d / f".{name}.{os.getpid()}"
                tmp.write_text(text)
                tmp.replace(f)
    except OSError:
        return None
    os.environ["OCL_ICD_VENDORS"] = str(d)
    return str(d)


def missing_libraries(lib: Path) -> list[str]:
    """The shared libraries libintelocl.so needs but cannot find (libimf.so etc. come from the
    wheel intel-cmplr-lib-rt, which intel-opencl-rt 2026.2 does not declare as a dependency)."""
    import ctypes

    try:
        ctypes.CDLL(str(lib))
        return []
    except OSError as e:
        return [str(e)]
