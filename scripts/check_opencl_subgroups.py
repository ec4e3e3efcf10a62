"""Checks an OpenCL installation without coopjit: compiles a subgroup kernel (intel_sub_group_shuffle,
required subgroup size 16) to SPIR-V with llc-22 and runs it through the system ICD loader with ctypes.

    python scripts/check_opencl_subgroups.py            # the ICD loader's first platform
    OCL_ICD_VENDORS=/path/to/vendors-dir python ...     # e.g. a directory with an .icd naming libintelocl.so
"""
import ctypes as C
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from spirv_kernels import SUBGROUP, subgroup_reference  # noqa: E402

vp, u32, sz = C.c_void_p, C.c_uint32, C.c_size_t


def chk(rc, what):
    if rc != 0:
        sys.exit(f"{what} failed with OpenCL error {rc}")


def main():
    with tempfile.TemporaryDirectory() as d:
        ll, spv = Path(d) / "k.ll", Path(d) / "k.spv"
        ll.write_text(SUBGROUP)
        subprocess.run(["/usr/lib/llvm-22/bin/llc", "-O2", "-mtriple=spirv64-unknown-unknown",
                        "--spirv-ext=+SPV_INTEL_subgroups", "-filetype=obj", str(ll), "-o", str(spv)], check=True)
        il = spv.read_bytes()
    cl = C.CDLL("libOpenCL.so.1")
    for f in ("clCreateContext", "clCreateCommandQueueWithProperties", "clCreateProgramWithIL", "clCreateKernel", "clSVMAlloc"):
        getattr(cl, f).restype = vp
    n = u32()
    rc = cl.clGetPlatformIDs(0, None, C.byref(n))
    if rc == -1001 or n.value == 0:  # CL_PLATFORM_NOT_FOUND_KHR
        sys.exit("no OpenCL platform: is an ICD registered (/etc/OpenCL/vendors or $OCL_ICD_VENDORS)?")
    plat, dev = vp(), vp()
    cl.clGetPlatformIDs(1, C.byref(plat), None)
    chk(cl.clGetDeviceIDs(plat, 0xFFFFFFFF, 1, C.byref(dev), None), "clGetDeviceIDs")
    name = C.create_string_buffer(256)
    cl.clGetDeviceInfo(dev, 0x102B, 256, name, None)
    err = C.c_int()
    ctx = vp(cl.clCreateContext(None, 1, C.byref(dev), None, None, C.byref(err)))
    chk(err.value, "clCreateContext")
    q = vp(cl.clCreateCommandQueueWithProperties(ctx, dev, None, C.byref(err)))
    chk(err.value, "clCreateCommandQueueWithProperties")
    prog = vp(cl.clCreateProgramWithIL(ctx, il, sz(len(il)), C.byref(err)))
    chk(err.value, "clCreateProgramWithIL")
    if cl.clBuildProgram(prog, 1, C.byref(dev), b"", None, None):
        log = C.create_string_buffer(1 << 16)
        cl.clGetProgramBuildInfo(prog, dev, 0x1183, 1 << 16, log, None)
        sys.exit(f"clBuildProgram failed:\n{log.value.decode()}")
    k = vp(cl.clCreateKernel(prog, b"subgroup_mix", C.byref(err)))
    chk(err.value, "clCreateKernel")
    N = 256
    ptrs = [cl.clSVMAlloc(ctx, C.c_uint64(1 | (1 << 10)), sz(N * 4), u32(64)) for _ in range(4)]  # fine-grain SVM
    arrs = [np.ctypeslib.as_array(C.cast(p, C.POINTER(C.c_float if i < 3 else C.c_int32)), (N,)) for i, p in enumerate(ptrs)]
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    arrs[0][:] = x
    for i, p in enumerate(ptrs):
        chk(cl.clSetKernelArgSVMPointer(k, u32(i), vp(p)), "clSetKernelArgSVMPointer")
    alpha = C.c_float(0.5)
    chk(cl.clSetKernelArg(k, u32(4), sz(4), C.byref(alpha)), "clSetKernelArg")
    g, l = sz(N), sz(64)
    chk(cl.clEnqueueNDRangeKernel(q, k, u32(1), None, C.byref(g), C.byref(l), u32(0), None, None), "clEnqueueNDRangeKernel")
    chk(cl.clFinish(q), "clFinish")
    rev, total = subgroup_reference(x, 0.5)
    ok = (arrs[3] == 16).all() and np.array_equal(arrs[1], rev.astype(np.float32)) and np.allclose(arrs[2], total, atol=1e-5)
    print(f"{name.value.decode()}: subgroup size {arrs[3][0]}, shuffle {'ok' if np.array_equal(arrs[1], rev) else 'WRONG'}, "
          f"sum max error {np.abs(arrs[2] - total).max():.2e}: {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
