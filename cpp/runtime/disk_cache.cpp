// The persistent code cache on disk (disk_cache.h).
#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include "core/build_id.h"
#include "core/error.h"
#include "core/xxh64.h"
#include "runtime/fork.h"
#include "runtime/kernel.h"

namespace fs = std::filesystem;

namespace coopjit::disk_cache {
namespace {

constexpr const char* kMagic = "coopjit-cache 1";

struct State {
  std::mutex mu;
  std::string dir;  // the kernels/ folder; "" when disabled
  Stats stats;
  std::set<int*> lock_fds;  // the descriptors of the live CompileLocks (closed in a forked child)
};
State& state() {
  static State s;
  return s;
}
void count(int64_t Stats::*field) {
  std::lock_guard<std::mutex> g(state().mu);
  ++(state().stats.*field);
}

void note(const std::string& what) {
  if (debug_enabled("cache")) std::cerr << "[coopjit] cache: " << what << "\n";
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string file_stem(const std::string& kind, const std::string& key) {
  const std::string id = identity() + "\n" + kind + "\n" + key;
  return xxh64_hex(id, 0) + xxh64_hex(id, 1);  // 128 bits: names never meet by chance
}

std::string kernels_dir() {
  std::lock_guard<std::mutex> g(state().mu);
  return state().dir;
}

bool read_file(const std::string& path, std::string& out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0;
  if (ok) {
    out.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::read(fd, &out[got], out.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    out.resize(got);
  }
  ::close(fd);
  return ok;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Parses and verifies one entry file; returns the reason it is unusable, or "" with `e` filled.
std::string parse(const std::string& data, const std::string& kind, const std::string& key, Entry& e) {
  std::istringstream in(data);
  std::string line, checksum;
  std::vector<std::pair<std::string, size_t>> sizes;
  if (!std::getline(in, line) || line != kMagic) return "not a coopjit cache entry";
  while (std::getline(in, line) && line != "end") {
    size_t sp = line.find(' ');
    std::string tag = line.substr(0, sp), rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (tag == "identity") {
      if (rest != identity()) return "written by another build (" + rest + ")";
    } else if (tag == "kind") {
      if (rest != kind) return "kind " + rest + " instead of " + kind;
    } else if (tag == "key") {
      if (rest != one_line(key)) return "its key differs (a hash collision)";
    } else if (tag == "meta") {
      size_t sp2 = rest.find(' ');
      e.meta[rest.substr(0, sp2)] = sp2 == std::string::npos ? "" : rest.substr(sp2 + 1);
    } else if (tag == "blob") {
      size_t sp2 = rest.find(' ');
      if (sp2 == std::string::npos) return "a malformed blob line";
      sizes.emplace_back(rest.substr(0, sp2), std::strtoull(rest.c_str() + sp2 + 1, nullptr, 10));
    } else if (tag == "xxh64") {
      checksum = rest;
    } else {
      return "an unknown header line";
    }
  }
  if (line != "end") return "truncated header";
  size_t pos = static_cast<size_t>(in.tellg()), total = 0;
  for (const auto& [name, n] : sizes) total += n;
  if (pos + total != data.size())
    return cat("payload of ", data.size() - pos, " bytes where the header says ", total, " (truncated?)");
  if (xxh64_hex(data.data() + pos, total) != checksum) return "checksum mismatch (corrupted)";
  for (const auto& [name, n] : sizes) {
    e.blobs[name] = data.substr(pos, n);
    pos += n;
  }
  return "";
}

// Names coopjit gives the files of its folder: "<32 hex digits>.<kind>" for entries, ".lock"
// for the lock files, "." + an entry's name + ".<pid>.<serial>.tmp" for writes in progress.
// Anything else (a user's backup folder, notes) is foreign: never counted, evicted or deleted.
bool is_stem(const std::string& name) {
  if (name.size() < 34 || name[32] != '.') return false;
  for (size_t i = 0; i < 32; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  for (size_t i = 33; i < name.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(name[i])) && name[i] != '-' && name[i] != '_') return false;
  return true;
}
bool is_entry_name(const std::string& name) { return is_stem(name) && name.substr(33) != "lock"; }
bool is_ours(const std::string& name) {
  if (is_stem(name)) return true;  // an entry or a lock
  const size_t n = name.size();
  return n > 5 && name[0] == '.' && name.compare(n - 4, 4, ".tmp") == 0 && is_stem(name.substr(1, name.find('.', 34) - 1));
}

// A regular file of ours holding an entry: its size and time; false for anything else (a
// folder, a link, a file that went away meanwhile).
bool entry_stat(const fs::path& p, uintmax_t& size, fs::file_time_type& when) {
  if (!is_entry_name(p.filename().string())) return false;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(p, ec)) || ec) return false;
  size = fs::file_size(p, ec);
  if (ec) return false;
  when = fs::last_write_time(p, ec);
  return !ec;
}

// The value of environment variable `name` as a finite number from 0; `fallback` where it is unset
// or empty; where it is anything else (text, a sign, inf, nan, trailing characters) `fallback`
// too, after a note "NAME=VALUE is not <what>".
double env_number(const char* name, double fallback, const char* what) {
  const char* env = std::getenv(name);
  if (!env || !*env) return fallback;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end != env && *end == '\0' && std::isfinite(v) && v >= 0) return v;
  note(cat(name, "=", env, " is not ", what));
  return fallback;
}

// Deletes the least recently used entries while they exceed the size limit. Only the entries
// themselves count: foreign files and folders are neither measured nor deleted.
void evict(const std::string& dir) {
  // A value that is not a number (or negative) is ignored, not read as 0: that would evict
  // every entry at every store.
  const double max_mb = env_number("COOPJIT_CACHE_MAX_MB", 1024.0, "a size in MB; using 1024");
  const double max_bytes = max_mb * 1024 * 1024;
  std::vector<std::tuple<fs::file_time_type, fs::path, uintmax_t>> entries;
  double total = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    uintmax_t size = 0;
    fs::file_time_type when;
    if (!entry_stat(f.path(), size, when)) continue;
    total += static_cast<double>(size);
    entries.emplace_back(when, f.path(), size);
  }
  if (total <= max_bytes) return;
  std::sort(entries.begin(), entries.end());
  for (const auto& [when, path, size] : entries) {
    if (total <= 0.75 * max_bytes) break;
    if (fs::remove(path, ec)) {
      total -= static_cast<double>(size);
      count(&Stats::evicted);
      note("evicted " + path.string() + " (COOPJIT_CACHE_MAX_MB)");
    }
  }
}

}  // namespace

std::string identity() {
  static const std::string id = cat("format=1 coopjit=", COOPJIT_VERSION, " build=", build_id(),
                                    " llvm=", COOPJIT_LLVM_VERSION);
  return id;
}

void set_directory(const std::string& dir) {
  std::lock_guard<std::mutex> g(state().mu);
  state().dir = dir.empty() ? "" : (fs::path(dir) / "kernels").string();
}

std::string directory() {
  std::string d = kernels_dir();
  return d.empty() ? d : fs::path(d).parent_path().string();
}

std::string entry_path(const std::string& kind, const std::string& key) {
  std::string d = kernels_dir();
  return d.empty() ? "" : d + "/" + file_stem(kind, key) + "." + kind;
}

std::optional<Entry> load(const std::string& kind, const std::string& key) {
  const std::string path = entry_path(kind, key);
  std::string data;
  if (path.empty()) return std::nullopt;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st)) return std::nullopt;
  if (!fs::is_regular_file(st)) {
    // Something else under an entry's name (a folder, a link): not an entry coopjit wrote.
    // Removed once, so that the store after the compile can put the entry there.
    note("rejected " + path + ": not a regular file; deleting it");
    fs::remove_all(path, ec);
    count(&Stats::rejected);
    return std::nullopt;
  }
  if (!read_file(path, data)) {
    note("rejected " + path + ": unreadable; deleting it");
    ::unlink(path.c_str());
    count(&Stats::rejected);
    return std::nullopt;
  }
  Entry e;
  std::string why = parse(data, kind, key, e);
  if (!why.empty()) {
    note("rejected " + path + ": " + why + "; deleting it");
    ::unlink(path.c_str());
    count(&Stats::rejected);
    return std::nullopt;
  }
  ::utimes(path.c_str(), nullptr);  // recently used: the last to be evicted
  count(&Stats::loads);
  note("loaded " + path);
  return e;
}

bool store(const std::string& kind, const std::string& key, const Entry& e) {
  const std::string path = entry_path(kind, key);
  if (path.empty()) return false;
  std::string payload, header = cat(kMagic, "\nidentity ", identity(), "\nkind ", kind, "\nkey ", one_line(key), "\n");
  for (const auto& [name, value] : e.meta) header += cat("meta ", name, " ", one_line(value), "\n");
  for (const auto& [name, blob] : e.blobs) {
    header += cat("blob ", name, " ", blob.size(), "\n");
    payload += blob;
  }
  header += cat("xxh64 ", xxh64_hex(payload), "\nend\n");
  static std::atomic<int64_t> serial{0};
  const std::string tmp = cat(fs::path(path).parent_path().string(), "/.", fs::path(path).filename().string(), ".",
                              ::getpid(), ".", serial++, ".tmp");
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, header) && write_all(fd, payload) && ::fsync(fd) == 0;
  if (fd >= 0) ok = (::close(fd) == 0) && ok;
  ok = ok && ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    note(cat("cannot write ", path, ": ", std::strerror(errno)));
    ::unlink(tmp.c_str());
    count(&Stats::write_errors);
    return false;
  }
  count(&Stats::stores);
  note("stored " + path);
  evict(fs::path(path).parent_path().string());
  return true;
}

double lock_timeout() {
  // As COOPJIT_CACHE_MAX_MB: a value that is not a finite number of seconds from 0 is passed over
  // (atof read "abc" as 0, no wait at all, and "inf" as a wait that never ends).
  return env_number("COOPJIT_CACHE_LOCK_TIMEOUT", 60.0, "a number of seconds from 0; waiting 60 s");
}

CompileLock::CompileLock(const std::string& kind, const std::string& key, double timeout_s) {
  const std::string d = kernels_dir();
  if (d.empty()) return;
  std::error_code ec;
  fs::create_directories(d, ec);
  const std::string path = d + "/" + file_stem(kind, key) + ".lock";
  {
    // Opened and registered under the state's mutex, which fork's prepare phase takes: a child
    // forked by another thread never has this descriptor unless it is in lock_fds (between the
    // open and the insert, a child got a copy it did not close: test_fork caught one, CI).
    std::lock_guard<std::mutex> g(state().mu);
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;
    state().lock_fds.insert(&fd_);
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  count(&Stats::lock_waits);
  note("waiting for another process compiling " + key);
  const auto t0 = std::chrono::steady_clock::now();
  int sleep_ms = 2;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < timeout_s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
    sleep_ms = std::min(sleep_ms * 2, 50);
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  }
  note(cat("gave up waiting after ", timeout_s, " s: compiling ", key, " anyway"));
  count(&Stats::lock_timeouts);
  std::lock_guard<std::mutex> g(state().mu);  // (closed before a fork can copy it unregistered)
  state().lock_fds.erase(&fd_);
  ::close(fd_);
  fd_ = -1;
}

CompileLock::~CompileLock() {
  if (fd_ >= 0) {
    // Unlocked and closed under the mutex too: erased first, a fork in between copied a locked
    // descriptor that the child kept.
    std::lock_guard<std::mutex> g(state().mu);
    state().lock_fds.erase(&fd_);
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

Stats stats() {
  std::lock_guard<std::mutex> g(state().mu);
  return state().stats;
}

Info info() {
  Info r;
  r.directory = directory();
  const std::string d = kernels_dir();
  std::error_code ec;
  if (d.empty() || !fs::is_directory(d, ec)) return r;
  for (const auto& f : fs::directory_iterator(d, ec)) {
    uintmax_t size = 0;
    fs::file_time_type when;
    if (!entry_stat(f.path(), size, when)) continue;
    ++r.entries;
    ++r.kinds[f.path().extension().string().substr(1)];
    r.bytes += static_cast<int64_t>(size);
  }
  return r;
}

int64_t clear() {
  const std::string d = kernels_dir();
  int64_t n = 0;
  std::error_code ec;
  if (d.empty() || !fs::is_directory(d, ec)) return 0;
  std::vector<fs::path> files;  // coopjit's own files only: foreign ones stay
  for (const auto& f : fs::directory_iterator(d, ec))
    if (is_ours(f.path().filename().string())) files.push_back(f.path());
  for (const auto& p : files) {
    const bool entry = is_entry_name(p.filename().string());
    if (fs::remove_all(p, ec) > 0 && entry) ++n;
  }
  note(cat("cleared ", n, " entries from ", d));
  return n;
}

}  // namespace coopjit::disk_cache

namespace coopjit {

// runtime/fork.h. The state consistent across fork(). In the child, the compile locks of the
// parent's threads: an flock lock belongs to the open file description, which the child's copy
// of the descriptor shares, so the child must neither unlock it (that would release the parent's
// lock) nor keep it open (a parent that dies would leave the key locked while the child lives).
// Closing the child's copy does neither; those CompileLocks (on stacks of threads the child does
// not have) are left with no descriptor.
void disk_cache_fork(fork_safety::Phase phase) {
  disk_cache::State& s = disk_cache::state();
  if (phase == fork_safety::Phase::prepare) {
    s.mu.lock();
    return;
  }
  if (phase == fork_safety::Phase::child) {
    for (int* fd : s.lock_fds) {
      ::close(*fd);
      *fd = -1;
    }
    s.lock_fds.clear();
  }
  s.mu.unlock();
}

}  // namespace coopjit
