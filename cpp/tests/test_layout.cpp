// Standalone unit test of cpp/layout/coopmatrix_layout: the two tables of seeds/001, shape rules,
// VNNI, the matrix_b K1 rule, an exhaustive bijection sweep against the document's closed form and
// load pseudo-code, and bad input. Prints one line per failed check, then "N passed, N failed".
#include <algorithm>
#include <exception>
#include <functional>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "layout/coopmatrix_layout.h"

using namespace coopjit::layout;

namespace {

int g_passed = 0, g_failed = 0;

void check(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failed;
    std::cout << "FAILED: " << what << "\n";
  }
}

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string describe(const CoopMatrixLayout& l) {
  return cat(l.rows(), "x", l.cols(), " ", use_name(l.use()), " ", l.dtype(),
             " S=", l.subgroup_size());
}

// Checks that fn throws a LayoutError whose message contains `needle`.
void check_throws(const std::function<void()>& fn, const std::string& needle,
                  const std::string& what) {
  try {
    fn();
    check(false, what + ": no exception");
  } catch (const LayoutError& e) {
    const std::string msg = e.what();
    check(msg.find(needle) != std::string::npos,
          what + ": message '" + msg + "' does not contain '" + needle + "'");
  } catch (...) {
    check(false, what + ": wrong exception type");
  }
}

const char* const kDtypes[] = {"i8",  "u8",  "i16",  "u16", "i32", "u32",     "i64",
                               "u64", "f16", "bf16", "f32", "f64", "f8_e4m3", "f8_e5m2"};
const Use kUses[] = {Use::a, Use::b, Use::acc};

// ---- The two tables of seeds/001, transcribed by hand: row v, entries "row,col" or "-,-". ----

const char* const kTable4x15[] = {
    "0,0  1,0  2,0  3,0  0,1  1,1  2,1  3,1  0,2  1,2  2,2  3,2  0,3  1,3  2,3  3,3",
    "0,4  1,4  2,4  3,4  0,5  1,5  2,5  3,5  0,6  1,6  2,6  3,6  0,7  1,7  2,7  3,7",
    "0,8  1,8  2,8  3,8  0,9  1,9  2,9  3,9  0,10 1,10 2,10 3,10 0,11 1,11 2,11 3,11",
    "0,12 1,12 2,12 3,12 0,13 1,13 2,13 3,13 0,14 1,14 2,14 3,14 -,-  -,-  -,-  -,-",
};

const char* const kTable1x17[] = {
    "0,0  0,1  0,2  0,3  0,4  0,5  0,6  0,7  0,8  0,9  0,10 0,11 0,12 0,13 0,14 0,15",
    "0,16 -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-  -,-",
};

// Parses one table line into (row, col) pairs, (-1, -1) for "-,-".
std::vector<Element> parse_line(const std::string& line) {
  std::vector<Element> out;
  std::istringstream is(line);
  std::string tok;
  while (is >> tok) {
    const size_t comma = tok.find(',');
    if (tok == "-,-") {
      out.push_back({-1, -1});
    } else {
      out.push_back({std::stoll(tok.substr(0, comma)), std::stoll(tok.substr(comma + 1))});
    }
  }
  return out;
}

// Compares table() of the layout slot by slot with the transcribed table.
template <size_t Rows>
void check_doc_table(const CoopMatrixLayout& l, const char* const (&doc)[Rows]) {
  const std::string name = describe(l);
  check(l.V() == static_cast<int64_t>(Rows), name + ": V");
  check(!l.vnni(), name + ": not VNNI");
  const std::vector<int64_t> t = l.table();
  check(t.size() == Rows * 16 * 2, name + ": table size");
  if (t.size() != Rows * 16 * 2) return;
  for (size_t v = 0; v < Rows; ++v) {
    const std::vector<Element> expected = parse_line(doc[v]);
    check(expected.size() == 16, name + ": transcription width");
    for (size_t p = 0; p < expected.size() && p < 16; ++p) {
      const Element got{t[(v * 16 + p) * 2], t[(v * 16 + p) * 2 + 1]};
      check(got == expected[p], cat(name, ": slot p=", p, " v=", v, " is ", got.row, ",",
                                    got.col, " expected ", expected[p].row, ",",
                                    expected[p].col));
    }
  }
}

void test_doc_tables() {
  // The document gives the 4x15 table with S = 16 for any use and the 1x17 one for f32. Neither
  // is VNNI packed for any type (15 and 17 are odd) and M < S gives K1 = 1 for matrix_b, so
  // both tables hold for every use and component type.
  for (Use use : kUses)
    for (const char* dt : kDtypes) {
      check_doc_table(CoopMatrixLayout(4, 15, use, dt, 16), kTable4x15);
      check_doc_table(CoopMatrixLayout(1, 17, use, dt, 16), kTable1x17);
    }
  const CoopMatrixLayout l(4, 15, Use::acc, "f32", 16);
  check(l.I() == 4 && l.J() == 16 && l.K() == 1 && l.K1() == 1 && l.K2() == 1 && l.V() == 4 &&
            l.omega() == 1 && !l.vnni(),
        "4x15 acc f32 S=16 shape");
  const CoopMatrixLayout m(1, 17, Use::acc, "f32", 16);
  check(m.I() == 1 && m.J() == 32 && m.K() == 1 && m.V() == 2, "1x17 acc f32 S=16 shape");
}

void test_component_size() {
  const int sizes[] = {1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  for (size_t n = 0; n < 14; ++n)
    check(component_size(kDtypes[n]) == sizes[n], cat("component_size(", kDtypes[n], ")"));
  for (const char* bad : {"", "F32", "float32", "i128", "f8"})
    check_throws([&] { component_size(bad); }, cat("'", bad, "'"), cat("component_size ", bad));
}

void test_use() {
  check(parse_use("a") == Use::a && parse_use("matrix_a") == Use::a, "parse_use a");
  check(parse_use("b") == Use::b && parse_use("matrix_b") == Use::b, "parse_use b");
  check(parse_use("acc") == Use::acc && parse_use("matrix_acc") == Use::acc, "parse_use acc");
  check(use_name(Use::a) == "a" && use_name(Use::b) == "b" && use_name(Use::acc) == "acc",
        "use_name");
  check_throws([] { parse_use("c"); }, "'c'", "parse_use c");
  check_throws([] { parse_use("A"); }, "'A'", "parse_use A");
}

void test_matrix_b_k1() {
  struct Case {
    int64_t M, S;
    const char* dt;
    int64_t K1, K2;
  };
  // K1 = omega_b = max(1, 2/size) if M/S > 1, else 1.
  const Case cases[] = {
      {64, 16, "i8", 2, 2},  {32, 16, "i8", 2, 1},     {16, 16, "i8", 1, 1},
      {8, 16, "i8", 1, 1},   {1, 16, "u8", 1, 1},      {128, 8, "f8_e4m3", 2, 8},
      {64, 32, "f8_e5m2", 2, 1}, {64, 16, "f16", 1, 4}, {64, 16, "bf16", 1, 4},
      {64, 16, "f32", 1, 4}, {64, 16, "f64", 1, 4},    {32, 32, "u8", 1, 1},
  };
  for (const Case& c : cases) {
    const CoopMatrixLayout l(c.M, 5, Use::b, c.dt, c.S);
    check(l.K1() == c.K1 && l.K2() == c.K2,
          cat(describe(l), ": K1=", l.K1(), " K2=", l.K2(), " expected ", c.K1, " ", c.K2));
    // matrix_a and acc always have K1 = 1.
    check(CoopMatrixLayout(c.M, 5, Use::a, c.dt, c.S).K1() == 1, cat(describe(l), ": a K1"));
    check(CoopMatrixLayout(c.M, 5, Use::acc, c.dt, c.S).K1() == 1, cat(describe(l), ": acc K1"));
  }
  // K1 = 2 interleaves row blocks: 64x3 i8 matrix_b, S = 16: I = 16, K1 = K2 = 2, J = 3, V = 12;
  // lane p component v = w1 + u*K1 + w2*K1*J holds row p + (w1 + 2*w2)*16, column u.
  const CoopMatrixLayout l(64, 3, Use::b, "i8", 16);
  check(l.owner(16, 0) == Slot{0, 1, 0}, "64x3 b i8: (16,0) in v=1");
  check(l.owner(0, 1) == Slot{0, 2, 0}, "64x3 b i8: (0,1) in v=2");
  check(l.owner(32, 0) == Slot{0, 6, 0}, "64x3 b i8: (32,0) in v=6");
  check(l.owner(63, 2) == Slot{15, 11, 0}, "64x3 b i8: (63,2) in p=15 v=11");
}

void test_vnni() {
  struct Case {
    int64_t M, N;
    Use use;
    const char* dt;
    int omega;
    bool vnni;
  };
  const Case cases[] = {
      {16, 16, Use::a, "f16", 2, true},      {16, 15, Use::a, "f16", 2, false},
      {16, 2, Use::a, "bf16", 2, true},      {16, 7, Use::a, "bf16", 2, false},
      {16, 12, Use::a, "i8", 4, true},       {16, 14, Use::a, "i8", 4, false},  // 14 % 2 == 0
      {16, 6, Use::a, "u8", 4, false},       {16, 32, Use::a, "f8_e4m3", 4, true},
      {16, 34, Use::a, "f8_e5m2", 4, false}, {16, 16, Use::a, "f32", 1, false},
      {16, 16, Use::a, "f64", 1, false},     {16, 16, Use::acc, "f16", 1, false},
      {16, 16, Use::b, "i8", 1, false},      {1, 4, Use::a, "i8", 4, true},
  };
  for (const Case& c : cases) {
    const CoopMatrixLayout l(c.M, c.N, c.use, c.dt, 16);
    check(l.omega() == c.omega && l.vnni() == c.vnni,
          cat(describe(l), ": omega=", l.omega(), " vnni=", l.vnni()));
    check(l.channels() == (c.vnni ? c.omega : 1), cat(describe(l), ": channels"));
  }
  // 16x4 f16 matrix_a, S = 16: I = 16, J = 4, two 32-bit entries per lane; entry v of lane p
  // packs columns 2v (channel 0) and 2v+1 (channel 1) of row p.
  const CoopMatrixLayout l(16, 4, Use::a, "f16", 16);
  check(l.V() == 2 && l.slot_cols() == 2, "16x4 a f16: V=2");
  const std::vector<int64_t> shape = l.table_shape();
  check(shape == std::vector<int64_t>{2, 16, 2, 2}, "16x4 a f16: table shape");
  check(l.element(5, 1, 1) == Element{5, 3}, "16x4 a f16: (p=5,v=1,c=1) -> (5,3)");
  check(l.owner(7, 2) == Slot{7, 1, 0}, "16x4 a f16: (7,2) -> p=7 v=1 c=0");
  // 32x8 i8 matrix_a, S = 16: K2 = 2, J' = 2: entry v = j' + 2*k2 holds columns 4j'..4j'+3.
  const CoopMatrixLayout m(32, 8, Use::a, "i8", 16);
  check(m.V() == 4 && m.K2() == 2, "32x8 a i8: V=4 K2=2");
  check(m.element(3, 3, 2) == Element{19, 6}, "32x8 a i8: (p=3,v=3,c=2) -> (19,6)");
  // 1x2 f16 matrix_a, S = 16: J = 16, 8 entries for 16 lanes; lane 0 packs (0,0) and (0,1).
  const CoopMatrixLayout n(1, 2, Use::a, "f16", 16);
  check(n.V() == 1 && n.vnni(), "1x2 a f16: V=1");
  check(n.element(0, 0, 1) == Element{0, 1}, "1x2 a f16: (0,0,1) -> (0,1)");
  check(!n.element(1, 0, 0) && !n.element(15, 0, 1), "1x2 a f16: padding");
}

// The document's load pseudo-code (SIMT, non-VNNI): returns, for lane p, the (row, col) loaded
// into each R[v], (-1, -1) where it stores zero. Rows and columns are not bound-checked.
std::vector<Element> load_pseudo_code(int64_t M, int64_t N, int64_t K1, int64_t S, int64_t p) {
  const int64_t I = std::min(M, S);
  const int64_t J = (I * N + S - 1) / S * S / I;
  const int64_t K = M / I;
  const int64_t K2 = K / K1;
  const bool needs_mask = J * S / I > N;
  const int64_t V = I * K * J / S;
  std::vector<Element> R(V, Element{-2, -2});
  const int64_t i0 = p % I, j0 = p / I;
  for (int64_t w1 = 0; w1 < K1; ++w1)
    for (int64_t w2 = 0; w2 < K2; ++w2) {
      const int64_t k1 = w1, k2 = w2;
      const int64_t row = i0 + (k1 + k2 * K1) * I;
      for (int64_t u = 0; u < V / K; ++u) {
        const int64_t j = j0 + u * (S / I);
        const bool mask_ok = !needs_mask || j < N;
        R[w1 + u * K1 + w2 * K1 * (V / K)] = mask_ok ? Element{row, j} : Element{-1, -1};
      }
    }
  return R;
}

// The layout depends on the component type only through its size: every type gives the same
// layout as the type of its size used in the sweep below.
const char* const kOnePerSize[] = {"f8_e4m3", "bf16", "u32", "f64"};  // sizes 1, 2, 4, 8

void test_same_size_same_layout() {
  for (const char* dt : kDtypes) {
    const char* rep = nullptr;
    for (const char* r : kOnePerSize)
      if (component_size(r) == component_size(dt)) rep = r;
    for (Use use : kUses)
      for (int64_t M : {1, 4, 16, 64})
        for (int64_t N = 1; N <= 20; ++N) {
          const CoopMatrixLayout l(M, N, use, dt, 16), r(M, N, use, rep, 16);
          check(l.table_shape() == r.table_shape() && l.table() == r.table(),
                cat(describe(l), ": differs from ", rep));
        }
  }
}

// Checks one layout of the sweep: the shape rules, the bijection between the M x N elements and
// the non-padding slots, owner/element consistency, the document's combined closed form and its
// load pseudo-code. Returns the number of failed checks.
int check_layout(int64_t M, int64_t N, Use use, const char* dt, int64_t S) {
  const CoopMatrixLayout l(M, N, use, dt, S);
  const std::string name = describe(l);
  const int size = component_size(dt);
  int errors = 0;  // reports the first three failures of a layout
  auto fail = [&](const std::string& what) {
    if (errors++ < 3) check(false, name + ": " + what);
  };

  // Shape, from the definitions.
  const int64_t I = std::min(M, S);
  int64_t J = N;
  while ((I * J) % S != 0) ++J;  // least n >= N with I*n a multiple of S
  const int64_t K1 = use == Use::b && M / S > 1 ? std::max(1, 2 / size) : 1;
  const int omega = use == Use::a ? std::max(1, 4 / size) : 1;
  const bool vnni = use == Use::a && size < 4 && N % omega == 0;
  const int ch = vnni ? omega : 1;
  const int64_t Jp = vnni ? (J + omega - 1) / omega : J;
  if (l.I() != I || l.J() != J || l.K() != M / I) fail("I, J, K");
  if (l.K1() != K1 || l.K1() * l.K2() != M / I) fail("K1, K2");
  if (l.omega() != omega || l.vnni() != vnni || l.channels() != ch) fail("omega, vnni");
  if (l.V() != (I * (M / I) * Jp + S - 1) / S) fail("V");
  if (!vnni && l.V() * S != I * (M / I) * J) fail("V*S != I*K*J");

  // Bijection and owner/element consistency over the table.
  const std::vector<int64_t> t = l.table();
  if (t.size() != static_cast<size_t>(l.V() * S * ch * 2)) {
    fail("table size");
    return errors;
  }
  std::vector<int> seen(M * N, 0);
  int64_t n_valid = 0;
  for (int64_t v = 0; v < l.V(); ++v)
    for (int64_t p = 0; p < S; ++p)
      for (int64_t c = 0; c < ch; ++c) {
        const size_t at = static_cast<size_t>(((v * S + p) * ch + c) * 2);
        const int64_t row = t[at], col = t[at + 1];
        const std::optional<Element> e = l.element(p, v, c);
        if (e ? !(*e == Element{row, col}) : (row != -1 || col != -1))
          fail(cat("table vs element at p=", p, " v=", v, " c=", c));
        if (row < 0) continue;
        ++n_valid;
        if (row >= M || col < 0 || col >= N) {
          fail(cat("element ", row, ",", col, " out of range"));
          continue;
        }
        ++seen[row * N + col];
        if (!(l.owner(row, col) == Slot{p, v, c}))
          fail(cat("owner(", row, ",", col, ")"));
      }
  if (n_valid != M * N) fail("number of non-padding slots");
  for (int x : seen)
    if (x != 1) fail("an element is not held exactly once");

  // The combined closed form of the document: lane p, slot v = w1 + u*K1 + w2*K1*(V/K)
  // holds row p%I + (w1 + w2*K1)*I and column j = p/I + u*(S/I) (for VNNI: entry
  // column j, channels c + j*omega, padding where j >= ceil(J/omega)).
  const int64_t K = M / I, VK = l.V() / K;
  if (l.V() % K != 0) fail("K does not divide V");
  for (int64_t p = 0; p < S; ++p)
    for (int64_t w1 = 0; w1 < K1; ++w1)
      for (int64_t u = 0; u < VK; ++u)
        for (int64_t w2 = 0; w2 < K / K1; ++w2)
          for (int64_t c = 0; c < ch; ++c) {
            const int64_t v = w1 + u * K1 + w2 * K1 * VK;
            const int64_t row = p % I + (w1 + w2 * K1) * I;
            const int64_t j = p / I + u * (S / I);
            const int64_t col = vnni ? c + j * omega : j;
            const bool pad = j >= Jp || col >= N;
            const std::optional<Element> e = l.element(p, v, c);
            if (pad ? bool(e) : !(e && *e == Element{row, col}))
              fail(cat("closed form at p=", p, " v=", v, " c=", c));
          }

  // The load pseudo-code (it has no VNNI packing).
  if (!vnni)
    for (int64_t p = 0; p < S; ++p) {
      const std::vector<Element> R = load_pseudo_code(M, N, K1, S, p);
      for (int64_t v = 0; v < l.V(); ++v) {
        const std::optional<Element> e = l.element(p, v);
        if (!(R[v] == (e ? *e : Element{-1, -1})))
          fail(cat("load pseudo-code at p=", p, " v=", v));
      }
    }
  return errors;
}

// Every M = 2^m <= 128, N = 1..70, S in {8, 16, 32}, every use and component size.
void test_sweep() {
  int layouts = 0, bad_layouts = 0;
  for (int64_t S : {8, 16, 32})
    for (int64_t M = 1; M <= 128; M *= 2)
      for (int64_t N = 1; N <= 70; ++N)
        for (Use use : kUses)
          for (const char* dt : kOnePerSize) {
            ++layouts;
            int errors = 1;
            try {
              errors = check_layout(M, N, use, dt, S);
            } catch (const std::exception& e) {
              check(false, cat(M, "x", N, " ", use_name(use), " ", dt, " S=", S,
                               ": unexpected exception: ", e.what()));
            }
            if (errors) ++bad_layouts;
          }
  check(layouts == 3 * 8 * 70 * 3 * 4, "sweep size");
  check(bad_layouts == 0, cat(bad_layouts, " of ", layouts, " layouts failed"));
}

void test_bad_input() {
  check_throws([] { CoopMatrixLayout(3, 4, Use::acc, "f32", 16); }, "rows 3", "rows 3");
  check_throws([] { CoopMatrixLayout(0, 4, Use::acc, "f32", 16); }, "rows 0", "rows 0");
  check_throws([] { CoopMatrixLayout(-8, 4, Use::acc, "f32", 16); }, "rows -8", "rows -8");
  check_throws([] { CoopMatrixLayout(4, 0, Use::acc, "f32", 16); }, "cols 0", "cols 0");
  check_throws([] { CoopMatrixLayout(4, -1, Use::acc, "f32", 16); }, "cols -1", "cols -1");
  check_throws([] { CoopMatrixLayout(4, 4, Use::acc, "f32", 12); },
               "coopmatrix: subgroup_size 12 is not a power of two", "subgroup_size 12");
  check_throws([] { CoopMatrixLayout(4, 4, Use::acc, "f32", 0); }, "subgroup_size 0", "S 0");
  check_throws([] { CoopMatrixLayout(4, 4, Use::acc, "f32", int64_t{1} << 31); },
               "subgroup_size 2147483648", "S 2^31");
  check_throws([] { CoopMatrixLayout(4, 4, Use::acc, "float", 16); }, "'float'", "dtype float");
  check_throws([] { CoopMatrixLayout(4, 4, parse_use("x"), "f32", 16); }, "'x'", "use x");

  const CoopMatrixLayout l(4, 15, Use::acc, "f32", 16);
  check_throws([&] { l.owner(4, 0); }, "row 4", "owner row 4");
  check_throws([&] { l.owner(-1, 0); }, "row -1", "owner row -1");
  check_throws([&] { l.owner(0, 15); }, "col 15", "owner col 15");
  check_throws([&] { l.element(16, 0); }, "p 16", "element p 16");
  check_throws([&] { l.element(-1, 0); }, "p -1", "element p -1");
  check_throws([&] { l.element(0, 4); }, "v 4", "element v 4");
  check_throws([&] { l.element(0, 0, 1); }, "c 1", "element c 1 (no VNNI)");
  const CoopMatrixLayout a(16, 16, Use::a, "i8", 16);
  check_throws([&] { a.element(0, 0, 4); }, "c 4", "element c 4 (VNNI)");
  check_throws([&] { a.element(0, 0, -1); }, "c -1", "element c -1 (VNNI)");
}

// Runs one test function; an unexpected exception counts as one failed check.
void run(const char* name, void (*test)()) {
  try {
    test();
  } catch (const std::exception& e) {
    check(false, cat(name, ": unexpected exception: ", e.what()));
  }
}

}  // namespace

int main() {
  run("component_size", test_component_size);
  run("use", test_use);
  run("doc tables", test_doc_tables);
  run("matrix_b K1", test_matrix_b_k1);
  run("vnni", test_vnni);
  run("bad input", test_bad_input);
  run("same size same layout", test_same_size_same_layout);
  run("sweep", test_sweep);
  std::cout << g_passed << " passed, " << g_failed << " failed\n";
  return g_failed == 0 ? 0 : 1;
}
