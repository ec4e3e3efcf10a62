// The AMX tile dot products computed as Intel's SDM defines them (TDPBF16PS, TDPFP16PS,
// TDPBSSD / TDPBSUD / TDPBUSD / TDPBUUD), for kernels built with plan amx=2 on CPUs without AMX:
// the same program as the tile path (packing, tile shapes, addressing), each tile instruction a
// call to coopjit_amx_tile_dp. Tiles are 16 rows of 64 bytes (the palette-1 maximum, the only
// shape coopjit's kernels use).
#pragma once

#include <cstdint>

namespace coopjit {

enum AmxKind : int32_t { kAmxBf16 = 0, kAmxFp16 = 1, kAmxSS = 2, kAmxSU = 3, kAmxUS = 4, kAmxUU = 5 };
inline constexpr const char* kAmxEmulationSymbol = "coopjit_amx_tile_dp";

}  // namespace coopjit

/// c (16 x 16 f32 or i32) += a (16 rows x 64 bytes) . b (16 rows x 64 bytes, VNNI pairs or
/// quads), as tdp<kind> does with M = 16, N = 64 bytes, K = 64 bytes.
extern "C" void coopjit_amx_tile_dp(int32_t kind, void* c, const void* a, const void* b);
