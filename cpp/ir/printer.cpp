// Prints the kernel IR as text (printer.h).
#include "ir/printer.h"

#include <iomanip>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace coopjit::ir {
namespace {

class Printer {
 public:
  explicit Printer(const Function& f) : f_(f) {
    for (Value* p : f.params) name_of(p);
    assign(f.body);
  }

  std::string function() {
    os_ << "func @" << f_.name << "(";
    for (size_t i = 0; i < f_.params.size(); ++i)
      os_ << (i ? ", " : "") << name_of(f_.params[i]) << ": " << f_.params[i]->type.str();
    os_ << ")";
    attrs(f_.attrs, " attributes ");
    os_ << " {\n";
    block(f_.body, 1);
    os_ << "}\n";
    return os_.str();
  }

  std::string single(const Op& op) {
    this->op(op, 0, /*regions=*/false);
    std::string s = os_.str();
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }

 private:
  // Names are assigned in program order so that they are stable and readable.
  void assign(const Block& b) {
    for (Value* a : b.args) name_of(a);
    for (const auto& op : b.ops) {
      for (const auto& r : op->regions) assign(*r);
      for (Value* r : op->results) name_of(r);
    }
  }

  const std::string& name_of(const Value* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    std::string base = v->hint.empty() ? std::to_string(next_++) : v->hint;
    std::string n = base;
    for (int k = 1; used_.count(n); ++k) n = base + "_" + std::to_string(k);
    used_.insert(n);
    return names_[v] = "%" + n;
  }

  void attrs(const std::map<std::string, Attr>& a, const char* lead) {
    if (a.empty()) return;
    os_ << lead << "{";
    bool first = true;
    for (const auto& [k, v] : a) {
      os_ << (first ? "" : ", ") << k;
      first = false;
      if (auto* i = std::get_if<int64_t>(&v)) os_ << " = " << *i;
      else if (auto* d = std::get_if<double>(&v)) os_ << " = " << number(*d);
      else os_ << " = \"" << std::get<std::string>(v) << "\"";
    }
    os_ << "}";
  }

  static std::string number(double d) {
    std::ostringstream s;
    s << std::setprecision(17) << d;
    std::string r = s.str();
    if (r.find_first_of(".eEn") == std::string::npos) r += ".0";
    return r;
  }

  void list(const std::vector<Value*>& vs, size_t from = 0, size_t to = SIZE_MAX) {
    for (size_t i = from; i < std::min(to, vs.size()); ++i) os_ << (i > from ? ", " : "") << name_of(vs[i]);
  }

  void block(const Block& b, int depth) {
    for (const auto& o : b.ops) op(*o, depth, true);
  }

  void results(const Op& o) {
    if (o.results.empty()) return;
    list(o.results);
    os_ << " = ";
  }

  void access(const Op& o, size_t base) {
    const auto& v = o.operands;
    os_ << name_of(v[base]) << "[" << name_of(v[base + 1]) << ", " << name_of(v[base + 2])
        << "] strides(" << name_of(v[base + 3]) << ", " << name_of(v[base + 4]) << ") bounds("
        << name_of(v[base + 5]) << ", " << name_of(v[base + 6]) << ")";
    if (o.int_attr("checked")) os_ << " checked";
    if (o.int_attr("vnni", 1) != 1) os_ << " vnni(" << o.int_attr("vnni") << ")";
    if (o.int_attr("prefetch")) os_ << " prefetch(" << o.int_attr("prefetch") << ")";
    if (o.int_attr("prefetch_far") && v.size() > base + 7)
      os_ << " prefetch_far(" << o.int_attr("prefetch_far") << ", " << name_of(v[base + 7]) << ")";
  }

  void op(const Op& o, int depth, bool regions) {
    std::string ind(2 * depth, ' ');
    os_ << ind;
    const auto& v = o.operands;
    switch (o.kind) {
      case OpKind::constant: {
        results(o);
        const Attr& a = o.attrs.at("value");
        if (auto* i = std::get_if<int64_t>(&a)) os_ << "constant " << *i;
        else os_ << "constant " << number(std::get<double>(a));
        os_ << " : " << o.result()->type.str();
        break;
      }
      case OpKind::binary: case OpKind::cmp: case OpKind::mat_binary:
        // Both operands have one type: print it once.
        results(o);
        os_ << mnemonic(o) << " ";
        list(v);
        os_ << " : " << v[0]->type.str();
        break;
      case OpKind::mat_accumulate:
        os_ << mnemonic(o) << " " << name_of(v[0]) << ", ";
        access(o, 1);
        os_ << " : " << v[0]->type.str();
        break;
      case OpKind::mat_reduce:
        results(o);
        os_ << mnemonic(o) << " " << name(static_cast<ReduceMode>(o.sub)) << " ";
        if (o.has_attr("combine")) os_ << std::get<std::string>(o.attrs.at("combine")) << " ";
        os_ << name_of(v[0]) << " : " << v[0]->type.str() << " -> " << o.result()->type.str();
        if (!o.regions.empty()) {
          os_ << " combine(";
          list(o.regions[0]->args);
          os_ << ")";
        }
        break;
      case OpKind::mat_per_element:
        results(o);
        os_ << mnemonic(o) << " ";
        list(v);
        os_ << " (";
        list(o.regions[0]->args);
        os_ << ") : ";
        for (size_t i = 0; i < v.size(); ++i) os_ << (i ? ", " : "") << v[i]->type.str();
        break;
      case OpKind::unary: case OpKind::convert: case OpKind::mat_convert: case OpKind::mat_transpose:
      case OpKind::mat_length: case OpKind::mat_get: case OpKind::mat_set: case OpKind::mat_coord:
      case OpKind::mat_sum_accumulate: case OpKind::mat_outer_product: case OpKind::vec_matrix_mul:
      case OpKind::vec_load: case OpKind::vec_store: {
        results(o);
        os_ << mnemonic(o) << " ";
        list(v);
        os_ << " : ";
        for (size_t i = 0; i < v.size(); ++i) os_ << (i ? ", " : "") << v[i]->type.str();
        if (!o.results.empty()) {
          os_ << " -> ";
          for (size_t i = 0; i < o.results.size(); ++i) os_ << (i ? ", " : "") << o.results[i]->type.str();
        }
        break;
      }
      case OpKind::select: case OpKind::mat_splat: case OpKind::mat_mul_add: case OpKind::mat_scale: {
        results(o);
        os_ << mnemonic(o) << " ";
        list(v);
        os_ << " : ";
        for (size_t i = 0; i < v.size(); ++i) os_ << (i ? ", " : "") << v[i]->type.str();
        if (o.kind == OpKind::mat_splat || o.kind == OpKind::mat_mul_add)
          os_ << " -> " << o.result()->type.str();
        break;
      }
      case OpKind::mat_load:
        results(o);
        os_ << mnemonic(o) << " ";
        access(o, 0);
        os_ << " : " << o.result()->type.str();
        break;
      case OpKind::mat_store:
        os_ << mnemonic(o) << " " << name_of(v[0]) << ", ";
        access(o, 1);
        os_ << " : " << v[0]->type.str();
        break;
      case OpKind::tensor_layout: {
        results(o);
        const int r = o.result()->type.rank;
        os_ << mnemonic(o);
        const char* fields[] = {"block", "dims", "strides", "offsets", "spans"};
        for (int f = 0; f < 5; ++f) {
          os_ << " " << fields[f] << "(";
          list(v, f * r, (f + 1) * r);
          os_ << ")";
        }
        os_ << " clamp_value(" << name_of(v[5 * r]) << ") : " << o.result()->type.str();
        break;
      }
      case OpKind::tensor_view: {
        results(o);
        const Type& t = o.result()->type;
        os_ << mnemonic(o);
        size_t at = 0;
        if (t.has_dims) {
          os_ << " dims(";
          list(v, 0, t.rank);
          os_ << ") strides(";
          list(v, t.rank, 2 * t.rank);
          os_ << ")";
          at = 2 * t.rank;
        }
        os_ << " clip(";
        list(v, at, at + 4);
        os_ << ") : " << t.str();
        break;
      }
      case OpKind::mat_load_tensor: case OpKind::mat_store_tensor: {
        results(o);
        os_ << mnemonic(o) << " ";
        list(v, 0, 3);
        if (v.size() > 4) os_ << ", " << name_of(v[4]);
        os_ << " extent(" << name_of(v[3]) << ")";
        if (!o.regions.empty()) {
          os_ << " decode(";
          list(o.regions[0]->args);
          os_ << ")";
        }
        os_ << " : " << v[o.kind == OpKind::mat_load_tensor ? 1 : 0]->type.str();
        break;
      }
      case OpKind::ptr_offset:
        results(o);
        os_ << "ptr.offset " << name_of(v[0]) << ", " << name_of(v[1]) << " : " << v[0]->type.str();
        break;
      case OpKind::prefetch:
        os_ << mnemonic(o) << " " << name_of(v[0]) << "[" << name_of(v[1]) << "] {write = " << o.int_attr("write", 0)
            << ", locality = " << o.int_attr("locality", 3) << "}";
        break;
      case OpKind::flag_set: case OpKind::flag_wait:
        os_ << mnemonic(o) << " " << name_of(v[0]) << "[" << name_of(v[1]) << "]";
        if (v.size() > 2) os_ << ", " << name_of(v[2]);
        if (o.has_attr("spin_limit")) os_ << " {spin_limit = " << o.int_attr("spin_limit") << "}";
        break;
      case OpKind::work_id: case OpKind::cycles:
        results(o);
        os_ << mnemonic(o) << " : index";
        break;
      case OpKind::shared_alloc:
        results(o);
        os_ << mnemonic(o) << " : " << o.result()->type.str();
        break;
      case OpKind::store:
        os_ << "store " << name_of(v[2]) << ", " << name_of(v[0]) << "[" << name_of(v[1]) << "] : " << v[0]->type.str();
        break;
      case OpKind::barrier:
        os_ << mnemonic(o);
        break;
      case OpKind::load:
        results(o);
        os_ << "load " << name_of(v[0]) << "[" << name_of(v[1]) << "] : " << o.result()->type.str();
        break;
      case OpKind::yield:
        os_ << "yield";
        if (!v.empty()) {
          os_ << " ";
          list(v);
        }
        break;
      case OpKind::for_: {
        results(o);
        const Block* body = o.regions.empty() ? nullptr : o.regions[0].get();
        os_ << "for " << (body ? name_of(body->args[0]) : "?") << " = " << name_of(v[0]) << " to "
            << name_of(v[1]) << " step " << name_of(v[2]);
        if (v.size() > 3) {
          os_ << " iter_args(";
          for (size_t i = 3; i < v.size(); ++i)
            os_ << (i > 3 ? ", " : "") << (body ? name_of(body->args[i - 2]) : "?") << " = "
                << name_of(v[i]);
          os_ << ") -> (";
          for (size_t i = 0; i < o.results.size(); ++i) os_ << (i ? ", " : "") << o.results[i]->type.str();
          os_ << ")";
        }
        break;
      }
      case OpKind::if_:
        results(o);
        os_ << "if " << name_of(v[0]);
        if (!o.results.empty()) {
          os_ << " -> (";
          for (size_t i = 0; i < o.results.size(); ++i) os_ << (i ? ", " : "") << o.results[i]->type.str();
          os_ << ")";
        }
        break;
    }
    if (o.kind != OpKind::mat_load && o.kind != OpKind::mat_store && o.kind != OpKind::mat_accumulate) {
      std::map<std::string, Attr> rest = o.attrs;
      rest.erase("value");
      rest.erase("combine");
      attrs(rest, " ");
    }
    if (!o.regions.empty()) {
      if (!regions) {
        os_ << " {...}\n";
        return;
      }
      os_ << " {\n";
      block(*o.regions[0], depth + 1);
      for (size_t r = 1; r < o.regions.size(); ++r) {
        os_ << ind << "} else {\n";
        block(*o.regions[r], depth + 1);
      }
      os_ << ind << "}";
    }
    os_ << "\n";
  }

  const Function& f_;
  std::ostringstream os_;
  std::unordered_map<const Value*, std::string> names_;
  std::unordered_set<std::string> used_;
  int next_ = 0;
};

}  // namespace

std::string print(const Function& f) { return Printer(f).function(); }
std::string print_op(const Function& f, const Op& op) { return Printer(f).single(op); }

}  // namespace coopjit::ir
