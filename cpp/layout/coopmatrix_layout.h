// How a cooperative matrix is spread over the lanes of a subgroup: the coopmatrix layout of the
// specification (seeds/001, "Coopmatrix layout, general version"), in pure C++17.
//
// Summary of the document, with the names used below:
//   A (M x N) is stored as the I x K1 x J x K2 tensor A*, A*[i,k1,j,k2] = A[i + k1*I + k2*I*K1, j]
//   (zero when that column is >= N), where I = min(M, S), J = ceil(I*N/S)*S/I, K = K1*K2 = M/I.
//   A* is linearized as L = i + k1*I + j*I*K1 + k2*I*K1*J and lane p holds, as component v, the
//   entry L = p + v*S; every lane holds V = I*K*J/S components.
//   K1 = 1 for acc and matrix_a; K1 = omega_b = max(1, 2/size) for matrix_b when M/S > 1, else 1.
//   A low-precision matrix_a (omega = max(1, 4/size) > 1) whose N is a multiple of omega is VNNI
//   packed: entry (i,k1,j',k2) of the I x K1 x ceil(J/omega) x K2 tensor holds, in channel c, the
//   column c + j'*omega; these 32-bit entries are distributed like the components above.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace coopjit::layout {

/// Bad input (shape, use, component type, index); the message names the offending value.
struct LayoutError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// The use of a cooperative matrix: left operand (a), right operand (b) or accumulator (acc).
enum class Use { a, b, acc };

/// Parses "a", "b", "acc" (or "matrix_a", "matrix_b", "matrix_acc"); throws LayoutError otherwise.
Use parse_use(std::string_view name);
/// The short name of a use: "a", "b" or "acc".
std::string_view use_name(Use use);

/// Size in bytes of a component type given by name (i8, u8, i16, u16, i32, u32, i64, u64, f16,
/// bf16, f32, f64, f8_e4m3, f8_e5m2); throws LayoutError for any other name.
int component_size(std::string_view dtype);

/// Where an element lives: lane p, component (or 32-bit VNNI entry) v, channel c (0 unless VNNI).
struct Slot {
  int64_t p = 0, v = 0, c = 0;
  bool operator==(const Slot& o) const { return p == o.p && v == o.v && c == o.c; }
};

/// A (row, col) index into the M x N matrix.
struct Element {
  int64_t row = 0, col = 0;
  bool operator==(const Element& o) const { return row == o.row && col == o.col; }
};

/// The layout of an M x N cooperative matrix with the given use and component type on a subgroup
/// of S lanes. Immutable; all quantities are computed by the constructor.
class CoopMatrixLayout {
 public:
  /// Throws LayoutError unless rows and subgroup_size are powers of two >= 1, cols >= 1 (all at
  /// most 2^30) and dtype is a known component type.
  CoopMatrixLayout(int64_t rows, int64_t cols, Use use, std::string_view dtype,
                   int64_t subgroup_size);

  int64_t rows() const { return M_; }           // M
  int64_t cols() const { return N_; }           // N
  Use use() const { return use_; }
  const std::string& dtype() const { return dtype_; }
  int component_size() const { return size_; }  // bytes per component
  int64_t subgroup_size() const { return S_; }  // S

  int64_t I() const { return I_; }
  int64_t J() const { return J_; }    // columns of A* (padded N)
  int64_t K() const { return K1_ * K2_; }
  int64_t K1() const { return K1_; }
  int64_t K2() const { return K2_; }
  /// Slots per lane: components, or 32-bit VNNI entries when vnni().
  int64_t V() const { return V_; }
  /// The document's omega = max(1, 4/size) for matrix_a (whether or not VNNI applies); 1 for
  /// acc and matrix_b, which are never VNNI packed.
  int omega() const { return omega_; }
  /// True when matrix_a is VNNI packed: omega > 1 and N is a multiple of omega.
  bool vnni() const { return vnni_; }
  /// Channels per slot: omega() when vnni(), else 1.
  int channels() const { return vnni_ ? omega_ : 1; }
  /// Extent of the distributed tensor's column index: ceil(J/omega) when vnni(), else J.
  int64_t slot_cols() const { return Jp_; }

  /// The slot holding element (row, col); throws LayoutError if it is not in the M x N range.
  Slot owner(int64_t row, int64_t col) const;
  /// The element held by lane p in slot v, channel c; nullopt for a padding (zero) element.
  /// Throws LayoutError unless 0 <= p < S, 0 <= v < V and 0 <= c < channels().
  std::optional<Element> element(int64_t p, int64_t v, int64_t c = 0) const;

  /// {V, S, 2}, or {V, S, omega, 2} when vnni().
  std::vector<int64_t> table_shape() const;
  /// Row-major array of table_shape(): (row, col) of every slot, (-1, -1) for padding.
  std::vector<int64_t> table() const;

 private:
  int64_t M_, N_, S_;
  Use use_;
  std::string dtype_;
  int size_;
  int64_t I_, J_, K1_, K2_, V_;
  int omega_;
  bool vnni_;
  int64_t Jp_;  // column extent of the distributed tensor (J, or ceil(J/omega) with VNNI)
};

}  // namespace coopjit::layout
