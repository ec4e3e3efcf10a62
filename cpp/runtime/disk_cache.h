// The persistent code cache on disk: one file per (kind, key) holding named byte blobs (an x86
// object, a SPIR-V module, IR texts) behind a header with the identity of the build that wrote
// it and an XXH64 checksum of the blobs. Writes are atomic (temp file, fsync, rename); a lock file per
// entry lets concurrent processes compile a key once; anything that does not verify (truncated,
// corrupted, another coopjit build or LLVM) is deleted, never loaded. No LLVM types here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace coopjit::disk_cache {

struct Entry {
  std::map<std::string, std::string> meta;   // one-line facts shown by info (the CPU, the plan)
  std::map<std::string, std::string> blobs;  // named payloads: "object", "spirv", "ir", "llvm", ...
};

/// Where entries live ("" disables the cache); Python sets it at import (COOPJIT_CACHE_DIR,
/// COOPJIT_CACHE=0, else the user cache directory). Thread-safe.
void set_directory(const std::string& dir);
std::string directory();

/// What an entry must have been written by to be used: format, coopjit version and build id,
/// LLVM version. Part of every entry's file name and header.
std::string identity();

/// The verified entry of (kind, key), or nothing (missing, disabled, or rejected and deleted).
std::optional<Entry> load(const std::string& kind, const std::string& key);
/// Writes the entry atomically; false (and a counted write error) when the disk refuses. Then,
/// if the entries exceed COOPJIT_CACHE_MAX_MB (1024 by default), deletes the least recently
/// used ones (loads refresh an entry's time) down to 3/4 of it.
bool store(const std::string& kind, const std::string& key, const Entry& e);
/// The file an entry of (kind, key) lives in (whether or not it exists).
std::string entry_path(const std::string& kind, const std::string& key);

/// Held while one key is compiled so that other processes wait and then load it instead of
/// compiling it too. Waits at most `timeout_s` (then proceeds unlocked: never blocks forever).
class CompileLock {
 public:
  CompileLock(const std::string& kind, const std::string& key, double timeout_s);
  ~CompileLock();
  CompileLock(const CompileLock&) = delete;
  CompileLock& operator=(const CompileLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};
/// COOPJIT_CACHE_LOCK_TIMEOUT seconds, 60 by default.
double lock_timeout();

struct Stats {
  int64_t loads = 0, stores = 0, rejected = 0, write_errors = 0, lock_waits = 0, lock_timeouts = 0, evicted = 0;
};
Stats stats();

struct Info {
  std::string directory;
  int64_t entries = 0, bytes = 0;
  std::map<std::string, int64_t> kinds;  // entries per kind
};
Info info();
/// Deletes every entry, lock and temp file; returns the number of entries deleted.
int64_t clear();

}  // namespace coopjit::disk_cache
