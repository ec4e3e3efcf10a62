// TensorAccessSpec: a load of a matrix from a buffer through a tensor layout and an optional
// view (SPV_NV_cooperative_matrix2), or the store of a matrix through them. The fields here
// change the generated code; the layout's and view's numbers are runtime arguments.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "ir/types.h"

namespace coopjit {

struct TensorAccessSpec {
  bool store = false;
  ir::ScalarType dtype = ir::ScalarType::f32;
  int64_t rows = 1, cols = 1;
  int rank = 1;  // layout rank
  ir::ClampMode clamp = ir::ClampMode::undefined;
  enum class View : uint8_t { none, no_dims, dims } view = View::none;
  int view_rank = 0;
  std::array<int8_t, 5> perm{};
  /// A decode function for the load: none, or "blocked" storage (each block of the layout's
  /// block size stored contiguously, row-major inside; the layout's strides count blocks).
  enum class Decode : uint8_t { none, blocked } decode = Decode::none;

  /// Throws UserError naming the values when the spec is not one coopjit can build.
  void validate() const;
  /// Everything that changes the code, as one string.
  std::string key() const;
};

}  // namespace coopjit
