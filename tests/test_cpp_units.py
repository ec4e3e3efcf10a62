"""Compiles the standalone C++ unit tests (cpp/tests/*.cpp with the sources they test) with g++
and runs them; each must exit 0 and end with "N passed, 0 failed"."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Unit test name -> the .cpp files of its program (paths relative to the repository root).
UNITS = {
    "layout": ["cpp/layout/coopmatrix_layout.cpp", "cpp/tests/test_layout.cpp"],
    # The kernel IR is independent of LLVM: its verifier is tested on its own.
    "verifier": ["cpp/ir/types.cpp", "cpp/ir/ir.cpp", "cpp/ir/builder.cpp", "cpp/ir/printer.cpp",
                 "cpp/ir/verifier.cpp", "cpp/tests/test_verifier.cpp"],
    # The extents a kernel's pointer parameters need (the argument check of custom kernels).
    "extent": ["cpp/ir/types.cpp", "cpp/ir/ir.cpp", "cpp/ir/builder.cpp", "cpp/ir/printer.cpp",
               "cpp/ir/extent.cpp", "cpp/tests/test_extent.cpp"],
}


@pytest.mark.parametrize("name", sorted(UNITS))
def test_cpp_unit(name, tmp_path):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    exe = tmp_path / f"test_{name}"
    sources = [str(ROOT / s) for s in UNITS[name]]
    build = subprocess.run(
        [gxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-I", str(ROOT / "cpp"), *sources,
         "-o", str(exe)],
        capture_output=True, text=True)
    assert build.returncode == 0, f"g++ failed:\n{build.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"{name} failed:\n{run.stdout}{run.stderr}"
    assert re.search(r"^\d+ passed, 0 failed$", run.stdout, re.MULTILINE), run.stdout
