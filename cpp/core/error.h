// Error kinds of coopjit: user errors (bad input, reach Python as ValueError/TypeError), device
// errors (a runtime or driver failed) and internal errors (a broken invariant: a bug in coopjit,
// reaches Python as RuntimeError).
#pragma once

#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace coopjit {

/// Bad input from a user: the message names the offending values. Python: ValueError.
struct UserError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A value of the wrong type or an unsupported dtype. Python: TypeError.
struct UserTypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A program the IR verifier rejects; the message quotes the operation with the IR printer.
struct VerifyError : UserError {
  using UserError::UserError;
};

/// A device or driver failure (OpenCL, Level Zero): a missing runtime, an API call that failed,
/// a program the driver does not build. The message names the call, the error code by name and,
/// for a failed build, the driver's build log. Python: coopjit.DeviceError (a RuntimeError).
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Memory that could not be allocated: the message names what it was for and how many bytes.
/// Python: MemoryError (pybind11 gives a std::bad_alloc's what()).
struct OutOfMemory : std::bad_alloc {
  explicit OutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

/// A broken invariant inside coopjit. Python: RuntimeError.
struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

/// Concatenates the arguments with operator<< into one string.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

#define COOPJIT_INTERNAL_ASSERT(cond, ...)                                                    \
  do {                                                                                         \
    if (!(cond))                                                                               \
      throw ::coopjit::InternalError(::coopjit::cat("internal error at ", __FILE__, ":",       \
                                                    __LINE__, ": ", #cond, " ", ##__VA_ARGS__)); \
  } while (0)

}  // namespace coopjit
