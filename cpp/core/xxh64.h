// XXH64, the 64-bit hash of xxHash, written here from its specification: the checksum of disk
// cache entries and the hash of their keys (fast: a few GB/s, so checking an entry costs little).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace coopjit {

uint64_t xxh64(const void* data, size_t n, uint64_t seed = 0);

/// xxh64 of `data` as 16 lowercase hex digits.
std::string xxh64_hex(const void* data, size_t n, uint64_t seed = 0);
inline std::string xxh64_hex(const std::string& data, uint64_t seed = 0) {
  return xxh64_hex(data.data(), data.size(), seed);
}

}  // namespace coopjit
