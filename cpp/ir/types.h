// The kernel IR's types: scalars, the index type, pointers, and coopmatrix<component, rows,
// cols, use, scope> (HLSL 0035 Matrix<ComponentType, M, N, Use, Scope>).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace coopjit::ir {

enum class ScalarType : uint8_t {
  i1,  // boolean (conditions)
  i8, u8, i16, u16, i32, u32, i64, u64,
  f16, bf16, f32, f64, f8_e4m3, f8_e5m2,
  index,  // signed 64-bit integer for sizes, offsets and strides
};

/// HLSL 0035 MatrixUse: A (left operand), B (right operand), Accumulator.
enum class Use : uint8_t { a, b, acc };
/// HLSL 0035 MatrixScope: Thread, Wave (= subgroup), ThreadGroup (= workgroup).
enum class Scope : uint8_t { thread, subgroup, workgroup };

/// SPV_NV_cooperative_matrix2 TensorClampMode: what an out-of-range tensor coordinate does.
enum class ClampMode : uint8_t { undefined, constant, clamp_to_edge, repeat, mirror_repeat };

std::string_view name(ClampMode c);
ClampMode parse_clamp(std::string_view s);
std::string_view name(ScalarType t);
std::string_view name(Use u);
std::string_view name(Scope s);
/// Parses a name as printed; throws UserError naming the value on an unknown name.
ScalarType parse_scalar(std::string_view s);
Use parse_use(std::string_view s);
Scope parse_scope(std::string_view s);
/// Parses a type as printed: f32, index, ptr<f16>, vector<f32, 16>,
/// coopmatrix<f16, 8, 32, a, subgroup>, groupshared<f32, 256>. Throws UserError naming the text.
struct Type;
Type parse_type(std::string_view s);

int size_in_bytes(ScalarType t);
bool is_float(ScalarType t);
bool is_integer(ScalarType t);  // i8..u64 and index (not i1)
bool is_signed(ScalarType t);

struct Type {
  enum class Kind : uint8_t { void_, scalar, pointer, matrix, tensor_layout, tensor_view, vector };
  Kind kind = Kind::void_;
  ScalarType scalar = ScalarType::index;  // scalar type, pointee, or matrix component
  int64_t rows = 0, cols = 0;             // matrix only
  Use use = Use::acc;                     // matrix only
  Scope scope = Scope::subgroup;          // matrix only
  int rank = 0;                           // tensor layout / view: number of dimensions (1..5)
  ClampMode clamp = ClampMode::undefined; // tensor layout only
  bool has_dims = false;                  // tensor view: has its own dimensions and strides
  bool shared = false;                    // pointer: a groupshared array of `cols` elements
  std::array<int8_t, 5> perm{};           // tensor view: the permutation of its dimensions
  /// Matrix only: HLSL 0035's SNorm / UNorm float components (1: SNorm, values in [-1, 1]; 2:
  /// UNorm, in [0, 1]), printed snorm_f32 / unorm_f16 ... Values of such a matrix are clamped
  /// into the range where an operation produces them (ir/norm_types.h).
  uint8_t norm = 0;

  static Type void_type() { return Type{}; }
  static Type of(ScalarType s) { Type t; t.kind = Kind::scalar; t.scalar = s; return t; }
  static Type index() { return of(ScalarType::index); }
  static Type boolean() { return of(ScalarType::i1); }
  static Type pointer(ScalarType elem) { Type t; t.kind = Kind::pointer; t.scalar = elem; return t; }
  /// HLSL's groupshared T Arr[n] (work-group local memory): a pointer to n elements one per
  /// work-group, printed groupshared<T, n>.
  static Type groupshared(ScalarType elem, int64_t n) {
    Type t = pointer(elem); t.shared = true; t.rows = 1; t.cols = n; return t;
  }
  static Type matrix(ScalarType c, int64_t rows, int64_t cols, Use use, Scope scope) {
    Type t; t.kind = Kind::matrix; t.scalar = c; t.rows = rows; t.cols = cols; t.use = use;
    t.scope = scope; return t;
  }

  /// A per-thread vector of n components (HLSL 0035's vector<T, N>, for vector x matrix ops).
  static Type vector(ScalarType c, int64_t n) { Type t; t.kind = Kind::vector; t.scalar = c; t.rows = 1; t.cols = n; return t; }
  static Type tensor_layout(int rank, ClampMode clamp) {
    Type t; t.kind = Kind::tensor_layout; t.rank = rank; t.clamp = clamp; return t;
  }
  static Type tensor_view(int rank, bool has_dims, const std::array<int8_t, 5>& perm) {
    Type t; t.kind = Kind::tensor_view; t.rank = rank; t.has_dims = has_dims; t.perm = perm; return t;
  }

  bool is_void() const { return kind == Kind::void_; }
  bool is_scalar() const { return kind == Kind::scalar; }
  bool is_index() const { return kind == Kind::scalar && scalar == ScalarType::index; }
  bool is_bool() const { return kind == Kind::scalar && scalar == ScalarType::i1; }
  bool is_pointer() const { return kind == Kind::pointer; }
  bool is_groupshared() const { return kind == Kind::pointer && shared; }
  bool is_matrix() const { return kind == Kind::matrix; }
  bool is_vector() const { return kind == Kind::vector; }
  bool is_tensor_layout() const { return kind == Kind::tensor_layout; }
  bool is_tensor_view() const { return kind == Kind::tensor_view; }
  /// Matrices, tensor layouts and views: values the lowerings hold as several parts.
  bool is_aggregate() const { return is_matrix() || is_tensor_layout() || is_tensor_view() || is_vector(); }

  bool operator==(const Type& o) const;
  bool operator!=(const Type& o) const { return !(*this == o); }
  /// The printed form: f32, index, ptr<f32>, coopmatrix<f32, 8, 32, acc, subgroup>,
  /// tensorlayout<2, clamp_to_edge>, tensorview<3, dims, perm(2, 0, 1)>.
  std::string str() const;
};

}  // namespace coopjit::ir
