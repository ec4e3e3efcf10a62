// Names, sizes and printing of the kernel IR's types.
#include "ir/types.h"

#include "core/error.h"

#include <string>
#include <vector>

namespace coopjit::ir {

namespace {
struct ScalarInfo { ScalarType t; std::string_view name; int size; };
constexpr ScalarInfo kScalars[] = {
    {ScalarType::i1, "i1", 1},       {ScalarType::i8, "i8", 1},
    {ScalarType::u8, "u8", 1},       {ScalarType::i16, "i16", 2},
    {ScalarType::u16, "u16", 2},     {ScalarType::i32, "i32", 4},
    {ScalarType::u32, "u32", 4},     {ScalarType::i64, "i64", 8},
    {ScalarType::u64, "u64", 8},     {ScalarType::f16, "f16", 2},
    {ScalarType::bf16, "bf16", 2},   {ScalarType::f32, "f32", 4},
    {ScalarType::f64, "f64", 8},     {ScalarType::f8_e4m3, "f8_e4m3", 1},
    {ScalarType::f8_e5m2, "f8_e5m2", 1}, {ScalarType::index, "index", 8},
};
const ScalarInfo& info(ScalarType t) { return kScalars[static_cast<int>(t)]; }
}  // namespace

std::string_view name(ScalarType t) { return info(t).name; }
std::string_view name(Use u) {
  switch (u) {
    case Use::a: return "a";
    case Use::b: return "b";
    case Use::acc: return "acc";
  }
  return "?";
}
std::string_view name(Scope s) {
  switch (s) {
    case Scope::thread: return "thread";
    case Scope::subgroup: return "subgroup";
    case Scope::workgroup: return "workgroup";
  }
  return "?";
}

std::string_view name(ClampMode c) {
  switch (c) {
    case ClampMode::undefined: return "undefined";
    case ClampMode::constant: return "constant";
    case ClampMode::clamp_to_edge: return "clamp_to_edge";
    case ClampMode::repeat: return "repeat";
    case ClampMode::mirror_repeat: return "mirror_repeat";
  }
  return "?";
}

ClampMode parse_clamp(std::string_view s) {
  for (ClampMode c : {ClampMode::undefined, ClampMode::constant, ClampMode::clamp_to_edge, ClampMode::repeat,
                      ClampMode::mirror_repeat})
    if (name(c) == s) return c;
  throw UserError(cat("unknown clamp mode '", s,
                      "' (known: undefined, constant, clamp_to_edge, repeat, mirror_repeat)"));
}

ScalarType parse_scalar(std::string_view s) {
  for (const auto& i : kScalars)
    if (i.name == s) return i.t;
  throw UserTypeError(cat("unknown component type '", s,
                          "' (known: i8, u8, i16, u16, i32, u32, i64, u64, f16, bf16, f32, f64, "
                          "f8_e4m3, f8_e5m2)"));
}
Use parse_use(std::string_view s) {
  if (s == "a") return Use::a;
  if (s == "b") return Use::b;
  if (s == "acc") return Use::acc;
  throw UserError(cat("unknown matrix use '", s, "' (known: a, b, acc)"));
}
Scope parse_scope(std::string_view s) {
  if (s == "thread") return Scope::thread;
  if (s == "subgroup") return Scope::subgroup;
  if (s == "workgroup") return Scope::workgroup;
  throw UserError(cat("unknown matrix scope '", s, "' (known: thread, subgroup, workgroup)"));
}

int size_in_bytes(ScalarType t) { return info(t).size; }
bool is_float(ScalarType t) {
  switch (t) {
    case ScalarType::f16: case ScalarType::bf16: case ScalarType::f32: case ScalarType::f64:
    case ScalarType::f8_e4m3: case ScalarType::f8_e5m2:
      return true;
    default:
      return false;
  }
}
bool is_integer(ScalarType t) { return !is_float(t) && t != ScalarType::i1; }
bool is_signed(ScalarType t) {
  switch (t) {
    case ScalarType::i8: case ScalarType::i16: case ScalarType::i32: case ScalarType::i64:
    case ScalarType::index:
      return true;
    default:
      return is_float(t);
  }
}

bool Type::operator==(const Type& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::void_: return true;
    case Kind::scalar: return scalar == o.scalar;
    case Kind::pointer: return scalar == o.scalar && shared == o.shared && (!shared || cols == o.cols);
    case Kind::matrix:
      return scalar == o.scalar && rows == o.rows && cols == o.cols && use == o.use &&
             scope == o.scope && norm == o.norm;
    case Kind::vector: return scalar == o.scalar && cols == o.cols;
    case Kind::tensor_layout: return rank == o.rank && clamp == o.clamp;
    case Kind::tensor_view: return rank == o.rank && has_dims == o.has_dims && perm == o.perm;
  }
  return false;
}

std::string Type::str() const {
  switch (kind) {
    case Kind::void_: return "void";
    case Kind::scalar: return std::string(name(scalar));
    case Kind::pointer:
      return shared ? cat("groupshared<", name(scalar), ", ", cols, ">") : cat("ptr<", name(scalar), ">");
    case Kind::matrix:
      return cat("coopmatrix<", norm == 1 ? "snorm_" : norm == 2 ? "unorm_" : "", name(scalar), ", ", rows, ", ", cols,
                 ", ", name(use), ", ",
                 name(scope), ">");
    case Kind::vector: return cat("vector<", name(scalar), ", ", cols, ">");
    case Kind::tensor_layout: return cat("tensorlayout<", rank, ", ", name(clamp), ">");
    case Kind::tensor_view: {
      std::string p;
      for (int i = 0; i < rank; ++i) p += cat(i ? ", " : "", int(perm[i]));
      return cat("tensorview<", rank, ", ", has_dims ? "dims" : "nodims", ", perm(", p, ")>");
    }
  }
  return "?";
}

Type parse_type(std::string_view text) {
  std::string s;
  for (char c : text)
    if (c != ' ') s += c;
  auto inner = [&](const std::string& head) -> std::vector<std::string> {
    if (s.rfind(head + "<", 0) != 0 || s.back() != '>') return {};
    std::vector<std::string> parts;
    std::string cur;
    for (char c : s.substr(head.size() + 1, s.size() - head.size() - 2)) {
      if (c == ',') parts.push_back(cur), cur.clear();
      else cur += c;
    }
    parts.push_back(cur);
    return parts;
  };
  auto number = [&](const std::string& x) -> int64_t {
    try {
      size_t used = 0;
      int64_t v = std::stoll(x, &used);
      if (used == x.size() && v > 0) return v;
    } catch (...) {
    }
    throw UserError(cat("type '", text, "': '", x, "' is not a positive size"));
  };
  if (auto p = inner("ptr"); !p.empty()) {
    if (p.size() != 1) throw UserError(cat("type '", text, "': ptr<T> takes one type"));
    return Type::pointer(parse_scalar(p[0]));
  }
  if (auto p = inner("groupshared"); !p.empty()) {
    if (p.size() != 2) throw UserError(cat("type '", text, "': groupshared<T, n>"));
    return Type::groupshared(parse_scalar(p[0]), number(p[1]));
  }
  if (auto p = inner("vector"); !p.empty()) {
    if (p.size() != 2) throw UserError(cat("type '", text, "': vector<T, n>"));
    return Type::vector(parse_scalar(p[0]), number(p[1]));
  }
  if (auto p = inner("coopmatrix"); !p.empty()) {
    if (p.size() != 5) throw UserError(cat("type '", text, "': coopmatrix<component, rows, cols, use, scope>"));
    uint8_t norm = 0;
    std::string c = p[0];
    if (c.rfind("snorm_", 0) == 0 || c.rfind("unorm_", 0) == 0) {
      norm = c[0] == 's' ? 1 : 2;
      c = c.substr(6);
      const ScalarType f = parse_scalar(c);
      if (f != ScalarType::f16 && f != ScalarType::f32 && f != ScalarType::f64)
        throw UserError(cat("type '", text, "': SNorm / UNorm components are f16, f32 or f64 (HLSL 0035's SNormF16 .. "
                            "UNormF64), not ", c));
    }
    Type t = Type::matrix(parse_scalar(c), number(p[1]), number(p[2]), parse_use(p[3]), parse_scope(p[4]));
    t.norm = norm;
    return t;
  }
  if (s == "index") return Type::index();
  if (s == "i1") return Type::boolean();
  return Type::of(parse_scalar(s));
}

}  // namespace coopjit::ir
