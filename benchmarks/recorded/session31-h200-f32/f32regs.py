"""ptxas registers / spills of the sm_90 f32 FMA kernels at 4096^3 (a @ b, a @ b.T, a.T @ b, a.T @ b.T
under the row-major API = the kernel's column layout) and named variants."""
from coopjit import _core, ptx as cptx
n = 4096
for lab, sa, sb, ov in [("a@b", [n, 1], [n, 1], {}), ("a@b.T", [n, 1], [1, n], {}), ("a.T@b", [1, n], [n, 1], {}),
                         ("a.T@b.T", [1, n], [1, n], {}), ("a@b kb16", [n, 1], [n, 1], {"kb": 16}),
                         ("a@b 4x2", [n, 1], [n, 1], {"sg_m": 4, "sg_n": 2}), ("a@b st3", [n, 1], [n, 1], {"stages": 3})]:
    k = _core.gpu_gemm_kernel("target:sm_90", ["f32"] * 3, [n, n, n, 1, 1], [*sa, *sb, n, 1, 0, 0, 0, 0, 0, 0], False, ov, None)
    print(lab, cptx.ptxas(k.ptx, "sm_90"), flush=True)
