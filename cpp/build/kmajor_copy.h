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
/// whole words: ld4 must cover ceil(R / 4) words). A work-group of 256 takes 32 x 8 blocks: its
/// lanes 32 consecutive br (a warp's writes: one 128-byte run of a destination row), its 8 warps
/// 8 consecutive bc, so that the 8 words of each source row it reads are one 32-byte sector,
/// fetched once into L1 for all 8 warps (with lanes along br only, each sector came from L2 for
/// each of its words: measured on the H100, 8192^2 bytes, about 0.9 TB/s of copy, ~12% of the
/// int8 8192^3 product). Launch: ceil(ceil(R / 4) / 32) ceil(C4 / 8) work-groups of 256.
std::unique_ptr<ir::Function> build_kmajor_copy(const std::string& name);

constexpr int kKmajorCopyGroup = 256;

}  // namespace coopjit
