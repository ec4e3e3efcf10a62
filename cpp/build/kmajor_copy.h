// The copy that makes an 8-bit GEMM operand K-major (gpu_plan.h, field kmajor): Hopper's wgmma
// reads 8-bit operands only contiguous along K (PTX ISA: no transpose for them), so an operand
// contiguous along M or N is first copied, transposed, into a workspace (gpu_gemm.cpp).
#pragma once

#include <memory>
#include <string>

#include "ir/ir.h"

namespace coopjit {

/// dst[c][r] = src[r][c] for a rows x cols byte matrix: src rows `ss4` 4-byte words apart (cols
/// contiguous, cols a multiple of 4), dst rows `ld4` words apart. Parameters, in order: S, D
/// (pointers to u32: 4-byte aligned), R (rows), C4 (cols / 4), ss4, ld4 (index). Each work-item
/// moves one 4 x 4 block: four word reads (rows 4 br .. 4 br + 3 at word bc; zero past R), the
/// bytes regrouped by integer arithmetic, four word writes (rows 4 bc .. 4 bc + 3 at word br,
/// whole words: ld4 must cover ceil(R / 4) words). Consecutive work-items take consecutive br, so
/// a warp's writes are one 128-byte run of a destination row (its reads: 32 rows of the source,
/// which the L1 cache keeps for the neighbouring columns). Launch: ceil(ceil(R / 4) C4 / 256)
/// work-groups of 256.
std::unique_ptr<ir::Function> build_kmajor_copy(const std::string& name);

constexpr int kKmajorCopyGroup = 256;

}  // namespace coopjit
