"""Hand-written LLVM IR kernels (OpenCL, spirv64) for the SPIR-V tests, with NumPy references."""
import numpy as np

HEADER = '''target triple = "spirv64-unknown-unknown"
declare spir_func i64 @_Z13get_global_idj(i32)
declare spir_func i32 @_Z22get_sub_group_local_idv()
declare spir_func i32 @_Z18get_sub_group_sizev()
declare spir_func float @_Z23intel_sub_group_shufflefj(float, i32)
declare spir_func float @_Z27intel_sub_group_shuffle_xorfj(float, i32)
'''

# rev[i] = x[base + 15 - lane] (intel_sub_group_shuffle), total[i] = alpha * x[i] + the sum of
# x over the subgroup (an xor butterfly of intel_sub_group_shuffle_xor), sgsize[i] = the subgroup
# size. Required subgroup size 16, work-group size 64, FP contraction allowed.
SUBGROUP = HEADER + '''
define spir_kernel void @subgroup_mix(ptr addrspace(1) %x, ptr addrspace(1) %rev, ptr addrspace(1) %total,
                                      ptr addrspace(1) %sgsize, float %alpha)
    !intel_reqd_sub_group_size !0 !reqd_work_group_size !1 {
entry:
  %gid = call spir_func i64 @_Z13get_global_idj(i32 0)
  %lane = call spir_func i32 @_Z22get_sub_group_local_idv()
  %p = getelementptr inbounds float, ptr addrspace(1) %x, i64 %gid
  %v = load float, ptr addrspace(1) %p, align 4
  %src = sub i32 15, %lane
  %r = call spir_func float @_Z23intel_sub_group_shufflefj(float %v, i32 %src)
  %q = getelementptr inbounds float, ptr addrspace(1) %rev, i64 %gid
  store float %r, ptr addrspace(1) %q, align 4
  %s1 = call spir_func float @_Z27intel_sub_group_shuffle_xorfj(float %v, i32 8)
  %a1 = fadd float %v, %s1
  %s2 = call spir_func float @_Z27intel_sub_group_shuffle_xorfj(float %a1, i32 4)
  %a2 = fadd float %a1, %s2
  %s3 = call spir_func float @_Z27intel_sub_group_shuffle_xorfj(float %a2, i32 2)
  %a3 = fadd float %a2, %s3
  %s4 = call spir_func float @_Z27intel_sub_group_shuffle_xorfj(float %a3, i32 1)
  %a4 = fadd float %a3, %s4
  %m = fmul contract float %alpha, %v
  %t = fadd contract float %m, %a4
  %o = getelementptr inbounds float, ptr addrspace(1) %total, i64 %gid
  store float %t, ptr addrspace(1) %o, align 4
  %n = call spir_func i32 @_Z18get_sub_group_sizev()
  %so = getelementptr inbounds i32, ptr addrspace(1) %sgsize, i64 %gid
  store i32 %n, ptr addrspace(1) %so, align 4
  ret void
}

!opencl.enable.FP_CONTRACT = !{}
!0 = !{i32 16}
!1 = !{i32 64, i32 1, i32 1}
'''


def subgroup_reference(x, alpha):
    """(rev, total) of SUBGROUP in float64, for subgroups of 16 consecutive work-items."""
    xs = x.astype(np.float64).reshape(-1, 16)
    rev = xs[:, ::-1].ravel()
    total = alpha * x.astype(np.float64) + np.repeat(xs.sum(axis=1), 16)
    return rev, total


# y[i] = a * x[i] + i for i < n (a loop-free kernel without metadata: shapes come from options).
AXPY_INDEX = HEADER + '''
define spir_kernel void @axpy_index(ptr addrspace(1) %x, ptr addrspace(1) %y, float %a, i64 %n) {
entry:
  %i = call spir_func i64 @_Z13get_global_idj(i32 0)
  %in = icmp ult i64 %i, %n
  br i1 %in, label %body, label %done
body:
  %p = getelementptr inbounds float, ptr addrspace(1) %x, i64 %i
  %v = load float, ptr addrspace(1) %p, align 4
  %f = uitofp i64 %i to float
  %m = fmul contract float %a, %v
  %r = fadd contract float %m, %f
  %q = getelementptr inbounds float, ptr addrspace(1) %y, i64 %i
  store float %r, ptr addrspace(1) %q, align 4
  br label %done
done:
  ret void
}
'''

# Calls a function that nothing defines: LLVM emits it as an import, the OpenCL build fails.
UNRESOLVED = '''target triple = "spirv64-unknown-unknown"
declare spir_func float @coopjit_undefined_helper(float)
define spir_kernel void @broken(ptr addrspace(1) %p) {
  %x = load float, ptr addrspace(1) %p
  %y = call spir_func float @coopjit_undefined_helper(float %x)
  store float %y, ptr addrspace(1) %p
  ret void
}
'''

# y[i] = bf16(x[i]) through SPV_INTEL_bfloat16_conversion (OpConvertFToBF16INTEL), as raw uint16.
TO_BF16 = '''target triple = "spirv64-unknown-unknown"
declare spir_func i64 @_Z13get_global_idj(i32)
declare spir_func i16 @_Z27__spirv_ConvertFToBF16INTELf(float)
define spir_kernel void @to_bf16(ptr addrspace(1) %x, ptr addrspace(1) %y) {
  %i = call spir_func i64 @_Z13get_global_idj(i32 0)
  %p = getelementptr inbounds float, ptr addrspace(1) %x, i64 %i
  %v = load float, ptr addrspace(1) %p
  %b = call spir_func i16 @_Z27__spirv_ConvertFToBF16INTELf(float %v)
  %q = getelementptr inbounds i16, ptr addrspace(1) %y, i64 %i
  store i16 %b, ptr addrspace(1) %q
  ret void
}
'''


def bf16_bits(x):
    """float32 -> bfloat16 bits, rounding to nearest even (finite inputs)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
