// Implements the coopmatrix layout of seeds/001: shape (I, J, K1, K2, V, omega, VNNI) and the
// (row, col) <-> (lane p, slot v, channel c) mapping through the linear index L.
#include "layout/coopmatrix_layout.h"

#include <algorithm>
#include <sstream>

namespace coopjit::layout {
namespace {

// The largest accepted M, N or S: keeps every product below (I*K*J <= 2^62) in int64_t range.
constexpr int64_t kMaxExtent = int64_t{1} << 30;

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

bool is_power_of_two(int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Checks a constructor argument named `what`: >= 1, not too large and, if asked, a power of two.
void check_extent(const char* what, int64_t value, bool power_of_two) {
  if (value < 1) throw LayoutError(cat("coopmatrix: ", what, " ", value, " must be >= 1"));
  if (value > kMaxExtent)
    throw LayoutError(cat("coopmatrix: ", what, " ", value, " is too large (at most ",
                          kMaxExtent, ")"));
  if (power_of_two && !is_power_of_two(value))
    throw LayoutError(cat("coopmatrix: ", what, " ", value, " is not a power of two"));
}

// Checks 0 <= value < end for an index argument named `what`.
void check_index(const char* what, int64_t value, int64_t end) {
  if (value < 0 || value >= end)
    throw LayoutError(cat("coopmatrix: ", what, " ", value, " is out of range [0, ", end, ")"));
}

}  // namespace

Use parse_use(std::string_view name) {
  if (name == "a" || name == "matrix_a") return Use::a;
  if (name == "b" || name == "matrix_b") return Use::b;
  if (name == "acc" || name == "matrix_acc") return Use::acc;
  throw LayoutError(cat("coopmatrix: unknown use '", name, "' (expected 'a', 'b' or 'acc')"));
}

std::string_view use_name(Use use) {
  switch (use) {
    case Use::a: return "a";
    case Use::b: return "b";
    case Use::acc: return "acc";
  }
  return "?";
}

int component_size(std::string_view dtype) {
  struct Entry {
    std::string_view name;
    int size;
  };
  static constexpr Entry kTypes[] = {
      {"i8", 1},  {"u8", 1},  {"i16", 2}, {"u16", 2},  {"i32", 4}, {"u32", 4},      {"i64", 8},
      {"u64", 8}, {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8}, {"f8_e4m3", 1}, {"f8_e5m2", 1},
  };
  for (const Entry& e : kTypes)
    if (e.name == dtype) return e.size;
  throw LayoutError(cat("coopmatrix: unknown dtype '", dtype, "'"));
}

CoopMatrixLayout::CoopMatrixLayout(int64_t rows, int64_t cols, Use use, std::string_view dtype,
                                   int64_t subgroup_size)
    : M_(rows), N_(cols), S_(subgroup_size), use_(use), dtype_(dtype) {
  check_extent("rows", M_, true);
  check_extent("cols", N_, false);
  check_extent("subgroup_size", S_, true);
  size_ = layout::component_size(dtype_);

  // Shape of A*: I = min(M, S); J = the least n >= N with I*n a multiple of S; K = M/I.
  I_ = std::min(M_, S_);
  J_ = ceil_div(I_ * N_, S_) * S_ / I_;
  const int64_t K = M_ / I_;

  // K1: 1 for acc and matrix_a; omega_b = max(1, 2/size) for matrix_b if M/S > 1, else 1.
  K1_ = 1;
  if (use_ == Use::b && M_ / S_ > 1) K1_ = std::max(1, 2 / size_);
  K2_ = K / K1_;

  // VNNI (matrix_a only): omega = max(1, 4/size) operands per 32-bit channel; packing applies
  // to low-precision types (omega > 1) when N is a multiple of omega.
  omega_ = use_ == Use::a ? std::max(1, 4 / size_) : 1;
  vnni_ = omega_ > 1 && N_ % omega_ == 0;

  // The distributed tensor is I x K1 x Jp x K2 with Jp = J, or Jp = ceil(J/omega) entries of
  // omega channels with VNNI. Without VNNI, I*K*J is a multiple of S by the choice of J. With
  // VNNI and I < S it may not be; V is then rounded up and the trailing slots are padding.
  Jp_ = vnni_ ? ceil_div(J_, omega_) : J_;
  V_ = ceil_div(I_ * K * Jp_, S_);
}

Slot CoopMatrixLayout::owner(int64_t row, int64_t col) const {
  check_index("row", row, M_);
  check_index("col", col, N_);
  // row = i + k1*I + k2*I*K1; column j of A*, or entry column j' = j / omega, channel j % omega.
  const int64_t i = row % I_, k1 = (row / I_) % K1_, k2 = row / (I_ * K1_);
  const int64_t j = vnni_ ? col / omega_ : col;
  const int64_t c = vnni_ ? col % omega_ : 0;
  const int64_t L = i + k1 * I_ + j * I_ * K1_ + k2 * I_ * K1_ * Jp_;
  return Slot{L % S_, L / S_, c};
}

std::optional<Element> CoopMatrixLayout::element(int64_t p, int64_t v, int64_t c) const {
  check_index("p", p, S_);
  check_index("v", v, V_);
  check_index("c", c, channels());
  const int64_t L = p + v * S_;
  if (L >= I_ * K() * Jp_) return std::nullopt;  // beyond the tensor (VNNI with I < S only)
  // The inverse of L.
  const int64_t i = L % I_;
  const int64_t k1 = (L / I_) % K1_;
  const int64_t j = (L / (I_ * K1_)) % Jp_;
  const int64_t k2 = L / (I_ * K1_ * Jp_);
  const int64_t row = i + k1 * I_ + k2 * I_ * K1_;
  const int64_t col = vnni_ ? c + j * omega_ : j;
  if (row >= M_ || col >= N_) return std::nullopt;  // zero padding
  return Element{row, col};
}

std::vector<int64_t> CoopMatrixLayout::table_shape() const {
  if (vnni_) return {V_, S_, omega_, 2};
  return {V_, S_, 2};
}

std::vector<int64_t> CoopMatrixLayout::table() const {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(V_ * S_ * channels() * 2));
  for (int64_t v = 0; v < V_; ++v)
    for (int64_t p = 0; p < S_; ++p)
      for (int64_t c = 0; c < channels(); ++c) {
        const std::optional<Element> e = element(p, v, c);
        out.push_back(e ? e->row : -1);
        out.push_back(e ? e->col : -1);
      }
  return out;
}

}  // namespace coopjit::layout
