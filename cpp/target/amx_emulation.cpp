// AMX tile dot products from the SDM's pseudo-code (amx_emulation.h).
#include "target/amx_emulation.h"

#include <cmath>
#include <cstring>

namespace {

using namespace coopjit;

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The instructions treat subnormal inputs as zero (DAZ) and flush subnormal results (FTZ).
float daz(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x; }
float bf16_to_float(uint16_t h) { return daz(bits_to_float(uint32_t(h) << 16)); }
// FP16 subnormals are normal in f32 and are converted exactly here: DAZ is BF16's rule in the
// SDM's text for TDPBF16PS; whether TDPFP16PS reads FP16 subnormals as zero could not be checked
// (no AMX-FP16 hardware here), and coopjit's tests use none.
float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0) return std::copysign(std::ldexp(float(man), -24), bits_to_float(sign));
  if (exp == 31) return bits_to_float(sign | 0x7F800000u | (man << 13));
  return bits_to_float(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

// FOR m, FOR k < 16 (a's 64 bytes / 4), FOR n < 16: c[m][n] += a[m][2k] b[k][2n], then
// += a[m][2k+1] b[k][2n+1], each addition rounded to f32 (to nearest even), flushed if subnormal.
template <float (*cvt)(uint16_t)>
void dp_pairs(float* c, const uint16_t* a, const uint16_t* b) {
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 16; ++n) {
        float t = c[m * 16 + n];
        for (int i = 0; i < 2; ++i) t = daz(t + daz(cvt(a[m * 32 + 2 * k + i]) * cvt(b[k * 32 + 2 * n + i])));
        c[m * 16 + n] = t;
      }
}

// c[m][n] += sum over i < 4 of a[m][4k+i] b[k][4n+i], each byte signed or unsigned by the kind,
// in 32-bit wrapping arithmetic.
template <typename TA, typename TB>
void dp_quads(int32_t* c, const uint8_t* a, const uint8_t* b) {
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 16; ++k)
      for (int n = 0; n < 16; ++n) {
        int32_t s = 0;
        for (int i = 0; i < 4; ++i)
          s += int32_t(static_cast<TA>(a[m * 64 + 4 * k + i])) * int32_t(static_cast<TB>(b[k * 64 + 4 * n + i]));
        c[m * 16 + n] = int32_t(uint32_t(c[m * 16 + n]) + uint32_t(s));
      }
}

}  // namespace

extern "C" void coopjit_amx_tile_dp(int32_t kind, void* c, const void* a, const void* b) {
  auto* fa = static_cast<const uint16_t*>(a);
  auto* fb = static_cast<const uint16_t*>(b);
  auto* ba = static_cast<const uint8_t*>(a);
  auto* bb = static_cast<const uint8_t*>(b);
  switch (kind) {
    case kAmxBf16: return dp_pairs<bf16_to_float>(static_cast<float*>(c), fa, fb);
    case kAmxFp16: return dp_pairs<fp16_to_float>(static_cast<float*>(c), fa, fb);
    case kAmxSS: return dp_quads<int8_t, int8_t>(static_cast<int32_t*>(c), ba, bb);
    case kAmxSU: return dp_quads<int8_t, uint8_t>(static_cast<int32_t*>(c), ba, bb);
    case kAmxUS: return dp_quads<uint8_t, int8_t>(static_cast<int32_t*>(c), ba, bb);
    case kAmxUU: return dp_quads<uint8_t, uint8_t>(static_cast<int32_t*>(c), ba, bb);
    default: return;
  }
}
