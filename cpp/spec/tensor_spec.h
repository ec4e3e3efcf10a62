// TensorAccessSpec: a load of a matrix from a buffer through a tensor layout and an optional
// view (SPV_NV_cooperative_matrix2), or the store of a matrix through them. The fields here
// change the generated code; the layout's and view's numbers are runtime arguments.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/types.h"

namespace coopjit::ir {
class Builder;
struct Value;
}  // namespace coopjit::ir

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
  /// A decode function for the load: none, "blocked" storage (each block of the layout's
  /// block size stored contiguously, row-major inside; the layout's strides count blocks), or a
  /// user's function (user_decode, keyed by user_decode_key: a hash of its IR).
  enum class Decode : uint8_t { none, blocked, user } decode = Decode::none;
  /// The buffer's element type: the matrix's (dtype) unless a user's decode function reads
  /// another (002: DecodeFunc's pointer may point to any type).
  ir::ScalarType buffer_dtype = ir::ScalarType::f32;
  bool buffer_dtype_set = false;
  /// A user's decode function: the element from (buf, extent, index, blockCoord, coordInBlock),
  /// built into the load's decode region.
  using DecodeFn = std::function<ir::Value*(ir::Builder&, ir::Value* buf, ir::Value* extent, ir::Value* index,
                                            const std::vector<ir::Value*>& block_coord,
                                            const std::vector<ir::Value*>& coord_in_block)>;
  DecodeFn user_decode;
  std::string user_decode_key;

  /// The buffer's element type.
  ir::ScalarType buffer_type() const { return buffer_dtype_set ? buffer_dtype : dtype; }

  /// Throws UserError naming the values when the spec is not one coopjit can build.
  void validate() const;
  /// Everything that changes the code, as one string.
  std::string key() const;
};

}  // namespace coopjit
