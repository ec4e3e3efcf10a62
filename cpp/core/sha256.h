// SHA-256 (FIPS 180-4), written here: the checksum of disk cache entries and the hash of their keys.
#pragma once

#include <string>

namespace coopjit {

/// The SHA-256 digest of `data` as 64 lowercase hex digits.
std::string sha256_hex(const std::string& data);

/// Incremental form: update() any number of times, then hex() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(const std::string& s) { update(s.data(), s.size()); }
  std::string hex();

 private:
  void block(const unsigned char* p);
  unsigned int h_[8];
  unsigned char buf_[64];
  size_t used_ = 0;
  unsigned long long bytes_ = 0;
};

}  // namespace coopjit
