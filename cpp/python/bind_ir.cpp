// Python bindings of the kernel IR builder: users write kernels from the coopmatrix operations in
// Python (coopjit.ir wraps this), and run them through the same verifier, printer, lowering and
// cache as the built-in recipes. Values are handles into one function; regions are Python
// callables that receive a builder positioned inside them.
#include <cmath>
#include <cstdint>
#include <optional>

#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "build/op_probes.h"
#include "runtime/op_support.h"
#include "core/error.h"
#include "ir/builder.h"
#include "ir/extent.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "core/xxh64.h"
#include "spec/gemm_spec.h"
#include "spec/tensor_spec.h"
#include "build/tensor_recipe.h"
#include "runtime/device_program.h"
#include "runtime/kernel.h"
#include "runtime/thread_pool.h"

namespace py = pybind11;
using namespace coopjit;
using namespace coopjit::ir;

namespace {

// What a compiled kernel can touch in each array it is given (ir/extent.h), and the check of
// the arrays of a call against it: sizes, writeability, element sizes, byte order. The extents
// are derived once, when the kernel is compiled; when they depend on the scalar arguments or the
// launch shape, they are evaluated again at each call (a walk over the IR, never per element).
struct ArgCheck {
  const Function* f = nullptr;
  std::shared_ptr<void> keep;  // keeps `f` alive (device kernels; a CPU kernel's PyFunction owns it)
  int64_t top_ops = 0;         // the body as compiled (a builder may append to it afterwards)
  std::vector<ParamExtent> fixed;
  bool dynamic = false;
  int64_t subgroup_size = 1, work_group_size = 1;
  bool device = false;

  std::string kernel;  // the name the user gave the kernel

  void init(const Function& fn, const std::string& name, int64_t sg, int64_t wg, bool dev) {
    f = &fn;
    kernel = name;
    top_ops = static_cast<int64_t>(fn.body.ops.size());
    subgroup_size = sg;
    work_group_size = wg;
    device = dev;
    ExtentEnv env;
    env.subgroup_size = sg;
    env.work_group_size = wg;
    bool steps = false;
    fixed = analyze_extents(fn, env, top_ops, &steps);  // UserError for an access that cannot be derived
    dynamic = steps || extents_depend_on_call(fixed);
  }

  std::string arg_name(size_t i) const {
    const Value* p = f->params[i];
    return cat("argument ", i, " (", p->hint.empty() ? "unnamed" : p->hint, ")");
  }

  // A scalar argument as T; TypeError naming it when it is not a number of that kind.
  template <typename T>
  T scalar_arg(const py::handle& a, size_t i) const {
    try {
      return py::cast<T>(a);
    } catch (const py::cast_error&) {
    } catch (const py::error_already_set&) {
    }
    throw UserTypeError(cat(arg_name(i), " must be ", std::is_same_v<T, double> ? "a number" : "an int", " (",
                            f->params[i]->type.str(), "), got ", std::string(py::repr(a))));
  }

  // Checks the arguments of one call; returns the extents of this call (by parameter): `fixed`,
  // or `scratch` filled for this call when they depend on it.
  const std::vector<ParamExtent>& check(const py::sequence& args, int64_t groups,
                                        std::vector<ParamExtent>& scratch) const;
};

struct PyFunction {
  std::unique_ptr<Function> f = std::make_unique<Function>();
  std::string name;  // as the user gave it (compiling renames f to its symbol)
  std::shared_ptr<const CompiledKernel> compiled;
  ArgCheck check;
};

// Elements in C order, one after the other (dimensions of one element, and empty arrays, have
// any stride).
bool c_contiguous(const py::array& a) {
  if (a.size() == 0) return true;
  py::ssize_t want = a.itemsize();
  for (py::ssize_t d = a.ndim() - 1; d >= 0; --d) {
    if (a.shape(d) == 1) continue;
    if (a.strides(d) != want) return false;
    want *= a.shape(d);
  }
  return true;
}

std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) s += cat(d ? ", " : "", a.shape(d));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

const std::vector<ParamExtent>& ArgCheck::check(const py::sequence& args, int64_t groups,
                                                std::vector<ParamExtent>& ext) const {
  if (args.size() != f->params.size())
    throw UserError(cat("the kernel takes ", f->params.size(), " arguments, got ", args.size()));
  if (device && groups < 0) throw UserError(cat("groups=", groups, " must not be negative"));
  const std::vector<ParamExtent>* e = &fixed;
  if (dynamic && groups != 0) {
    std::vector<int64_t> ints(f->params.size(), 0);
    for (size_t i = 0; i < args.size(); ++i) {
      const Type& t = f->params[i]->type;
      if (t.is_scalar() && !is_float(t.scalar)) {
        py::object a = args[i];
        if (!py::isinstance<py::int_>(a) && !py::hasattr(a, "__index__"))
          throw UserTypeError(cat(arg_name(i), " must be an int (", t.str(), "), got ",
                                  std::string(py::str(py::type::of(a).attr("__name__")))));
        ints[i] = scalar_arg<int64_t>(a, i);
      }
    }
    ExtentEnv env;
    env.ints = &ints;
    env.groups = groups;
    env.subgroup_size = subgroup_size;
    env.work_group_size = work_group_size;
    ext = analyze_extents(*f, env, top_ops);
    e = &ext;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const Value* p = f->params[i];
    if (!p->type.is_pointer()) continue;
    if (!py::isinstance<py::array>(args[i]))
      throw UserTypeError(cat(arg_name(i), " must be a NumPy array, got ",
                              std::string(py::str(py::type::of(args[i]).attr("__name__")))));
    auto a = py::reinterpret_borrow<py::array>(args[i]);
    if (a.itemsize() != size_in_bytes(p->type.scalar))
      throw UserTypeError(cat(arg_name(i), " has ", a.itemsize(), "-byte elements (", std::string(py::str(a.dtype())),
                              "); the kernel reads ", p->type.str()));
    const char kind = a.dtype().kind();
    if (kind == 'O' || (kind == 'V' && a.dtype().attr("hasobject").cast<bool>()))
      throw UserTypeError(cat(arg_name(i), " holds Python objects (", std::string(py::str(a.dtype())),
                              "); the kernel reads ", p->type.str(), " elements"));
    const char order = a.dtype().byteorder();
    constexpr bool little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
    if ((order == '>' && little) || (order == '<' && !little))
      throw UserTypeError(cat(arg_name(i), " has non-native byte order (", std::string(py::str(a.dtype())),
                              "); the kernel reads native ", p->type.str(), ": pass a.astype(a.dtype.newbyteorder('='))"));
    if (groups == 0) continue;
    const ParamExtent& x = (*e)[i];
    const char* verb = x.written ? (x.read ? "reads and writes" : "writes") : "reads";
    if (x.written && !a.writeable())
      throw UserError(cat(kernel, ": ", arg_name(i), " is written by the kernel, but the array given (shape ",
                          shape_text(a), ") is read-only"));
    // A written array that is not C-contiguous goes through a C-order copy written back after the
    // run: elements that share memory (a zero stride, rows that overlap) took one another's
    // values. Refused as an out= of matmul / reduce is (ValueError naming the two elements).
    if (x.written && !c_contiguous(a))
      py::module_::import("coopjit._arrays").attr("check_own_elements")(a, arg_name(i), kernel);
    if (!x.bounded)
      throw UserError(cat(kernel, ": ", arg_name(i), ": cannot bound the elements the kernel ", verb,
                          " with these arguments\n  in: ", x.why));
    if (!x.touched) continue;
    if (x.lo < 0)
      throw UserError(cat(kernel, ": ", arg_name(i), ": the kernel ", verb, " elements ", x.lo, " to ", x.hi,
                          " of it, before its first element (an unchecked access at a negative position; "
                          "checked accesses skip elements outside their bounds)"));
    const int64_t size = static_cast<int64_t>(a.size());
    if (x.hi >= size) {
      const int64_t need = x.hi + 1;
      std::string hint;
      if (x.row_stride > 0) hint = cat(", shape (", (need + x.row_stride - 1) / x.row_stride, ", ", x.row_stride, ")");
      throw UserError(cat(kernel, ": ", arg_name(i), " is too small: the kernel ", verb, " elements ", x.lo, " to ",
                          x.hi, " of it, so it needs at least ", need, " elements (", p->type.str(), hint,
                          " in C order); got shape ", shape_text(a), " (", size, " elements)"));
    }
  }
  return *e;
}

struct PyValue {
  std::shared_ptr<PyFunction> fn;
  Value* v;
  std::string type() const { return v->type.str(); }
};

struct PyBuilder {
  std::shared_ptr<PyFunction> fn;
  Builder b;

  PyValue wrap(Value* v) const { return {fn, v}; }
  std::vector<PyValue> wrap(const std::vector<Value*>& vs) const {
    std::vector<PyValue> out;
    for (Value* v : vs) out.push_back(wrap(v));
    return out;
  }
  Value* unwrap(const PyValue& p) const {
    if (p.fn != fn) throw UserError("a value of another kernel was used in this kernel");
    return p.v;
  }
  std::vector<Value*> unwrap(const std::vector<PyValue>& ps) const {
    std::vector<Value*> out;
    for (const auto& p : ps) out.push_back(unwrap(p));
    return out;
  }
  PyBuilder inner(Builder& in) const { return {fn, in}; }
};

// A constant of scalar type t from a Python number. Integer types take the number exactly (a
// Python int is never rounded through a double: 2**53 + 1 as i64) or a float with an integral
// value, inside the type's range; anything else is a ValueError naming the value and the type.
// (A double cast to int64 was undefined behaviour for NaN and values beyond 2**63, and values
// outside a narrower type wrapped: 300 as i8 was 44, 2.5 as i32 was 2.)
Value* make_constant(Builder& b, const py::object& v, ScalarType t) {
  if (is_float(t)) return b.constant(v.cast<double>(), t);
  const bool is_bool = t == ScalarType::i1;
  const int bits = is_bool ? 1 : 8 * size_in_bytes(t);
  const bool sign = !is_bool && (is_signed(t) || t == ScalarType::index);
  // The range as Python ints: [lo, hi].
  py::int_ one(1);
  py::object hi = sign ? (one.attr("__lshift__")(bits - 1) - one) : (one.attr("__lshift__")(bits) - one);
  py::object lo = sign ? -(hi + one) : py::int_(0);
  const std::string tname = is_bool ? "i1" : Type::of(t).str();
  py::object n;
  if (py::isinstance<py::float_>(v) || (!py::hasattr(v, "__index__") && py::hasattr(v, "__float__"))) {
    const double d = v.cast<double>();
    if (!std::isfinite(d) || d != std::floor(d))
      throw UserError(cat("constant ", py::str(py::repr(v)).cast<std::string>(), " is not an integer: a ", tname,
                          " constant needs one (in [", py::str(lo).cast<std::string>(), ", ",
                          py::str(hi).cast<std::string>(), "])"));
    n = py::reinterpret_steal<py::object>(PyLong_FromDouble(d));
  } else {
    PyObject* idx = PyNumber_Index(v.ptr());
    if (!idx) throw py::error_already_set();
    n = py::reinterpret_steal<py::object>(idx);
  }
  if (n < lo || n > hi)
    throw UserError(cat("constant ", py::str(py::repr(v)).cast<std::string>(), " is outside the range of ", tname,
                        " [", py::str(lo).cast<std::string>(), ", ", py::str(hi).cast<std::string>(), "]"));
  // Stored as int64 (the attribute's type): a u64 above 2**63 - 1 as its two's complement bits.
  const int64_t value = n > py::int_(INT64_MAX) ? static_cast<int64_t>(n.cast<uint64_t>()) : n.cast<int64_t>();
  return b.constant_int(value, t);
}

BinOp parse_bin(const std::string& s) {
  static const std::pair<const char*, BinOp> ops[] = {{"add", BinOp::add}, {"sub", BinOp::sub}, {"mul", BinOp::mul},
                                                      {"div", BinOp::div}, {"rem", BinOp::rem}, {"min", BinOp::min},
                                                      {"max", BinOp::max}, {"and", BinOp::and_}, {"or", BinOp::or_}};
  for (auto& [n, b] : ops)
    if (s == n) return b;
  throw UserError(cat("unknown binary operation '", s, "' (known: add, sub, mul, div, rem, min, max, and, or)"));
}
CmpPred parse_cmp(const std::string& s) {
  static const std::pair<const char*, CmpPred> ops[] = {{"lt", CmpPred::lt}, {"le", CmpPred::le}, {"gt", CmpPred::gt},
                                                        {"ge", CmpPred::ge}, {"eq", CmpPred::eq}, {"ne", CmpPred::ne}};
  for (auto& [n, p] : ops)
    if (s == n) return p;
  throw UserError(cat("unknown comparison '", s, "' (known: lt, le, gt, ge, eq, ne)"));
}
UnOp parse_un(const std::string& s) {
  static const std::pair<const char*, UnOp> ops[] = {{"neg", UnOp::neg}, {"abs", UnOp::abs}, {"exp", UnOp::exp},
                                                     {"log", UnOp::log}, {"tanh", UnOp::tanh}, {"sqrt", UnOp::sqrt},
                                                     {"erf", UnOp::erf}};
  for (auto& [n, u] : ops)
    if (s == n) return u;
  throw UserError(cat("unknown unary operation '", s, "' (known: neg, abs, exp, log, tanh, sqrt, erf)"));
}
ReduceMode parse_mode(const std::string& s) {
  if (s == "row") return ReduceMode::row;
  if (s == "column") return ReduceMode::column;
  if (s == "both" || s == "row_column") return ReduceMode::both;
  if (s == "2x2") return ReduceMode::quad;
  throw UserError(cat("unknown reduce mode '", s, "' (known: row, column, both, 2x2)"));
}

// Runs a compiled custom kernel: arguments in parameter order, arrays for pointers (their
// elements in C order: element 0 is the address; other arrays go through a C-order copy,
// written back when the kernel writes them), ints for index/integer parameters, floats for
// floats. The arrays are checked against the extents the kernel can touch first (ArgCheck).
// Whether a block (recursively) reads the work-group id or count: such a kernel needs a grid.
bool reads_groups(const Block& blk) {
  for (const auto& op : blk.ops) {
    if (op->kind == OpKind::work_id &&
        (static_cast<WorkId>(op->sub) == WorkId::group || static_cast<WorkId>(op->sub) == WorkId::groups))
      return true;
    for (const auto& r : op->regions)
      if (reads_groups(*r)) return true;
  }
  return false;
}

// The launch grid of a call: `groups` work-groups where the kernel reads work-group ids (required:
// no default could know how much of the data the kernel covers), else one invocation.
int64_t call_groups(const Function& f, const std::string& name, const py::object& groups) {
  const bool grid = reads_groups(f.body);
  if (groups.is_none()) {
    if (grid)
      throw UserTypeError(cat(name, ": the kernel reads work-group ids, so its launch grid is required: call it with "
                              "groups=<number of work-groups>"));
    return 1;
  }
  if (py::isinstance<py::bool_>(groups) || !py::hasattr(groups, "__index__"))
    throw UserTypeError(cat("groups must be an int, got ", std::string(py::repr(groups))));
  const int64_t g = py::cast<int64_t>(groups.attr("__index__")());
  if (g < 0 || g > (int64_t(1) << 40)) throw UserError(cat("groups=", g, " must be in [0, 2^40]"));
  if (!grid && g != 1)
    throw UserError(cat(name, ": groups=", g, " but the kernel reads no work-group id: every work-group would run the "
                        "same work (pass groups=1, or read work_id('group') in the kernel)"));
  return g;
}

void run_custom(const PyFunction& pf, const py::args& args, const py::object& groups_arg) {
  const Function& f = *pf.f;
  if (!pf.compiled) throw UserError("compile the kernel first");
  const int64_t groups = call_groups(f, pf.name, groups_arg);
  std::vector<ParamExtent> scratch;
  const std::vector<ParamExtent>& ext = pf.check.check(args, groups, scratch);
  std::vector<void*> ptrs;
  std::vector<int64_t> ints;
  std::vector<double> fps;
  std::vector<py::array> keep;
  struct Copy {
    py::array src, copy;  // a non-contiguous argument and its C-order copy
    bool written;         // written back after the run
  };
  std::vector<Copy> copies;
  for (size_t i = 0; i < args.size(); ++i) {
    const Value* p = f.params[i];
    if (p->type.is_pointer()) {
      auto a = py::reinterpret_borrow<py::array>(args[i]);
      if (!c_contiguous(a)) {
        py::array c;
        bool have = false;
        for (auto& cp : copies)
          if (cp.src.ptr() == args[i].ptr()) {  // the same array twice: one copy
            c = cp.copy;
            cp.written = cp.written || ext[i].written;
            have = true;
          }
        if (!have) {
          auto may_share = py::module_::import("numpy").attr("may_share_memory");
          for (size_t j = 0; j < args.size(); ++j)
            if (j != i && args[j].ptr() != args[i].ptr() && f.params[j]->type.is_pointer() &&
                (ext[i].written || ext[j].written) && may_share(args[i], args[j]).cast<bool>())
              throw UserError(cat(pf.check.arg_name(i), " is not C-contiguous (it is read through a C-order copy) "
                                  "and overlaps ", pf.check.arg_name(j), ", which the kernel ",
                                  ext[i].written ? "also reaches" : "writes", ": pass contiguous arrays"));
          c = py::module_::import("numpy").attr("ascontiguousarray")(a);
          copies.push_back({a, c, ext[i].written});
        }
        a = c;
      }
      keep.push_back(a);
      ptrs.push_back(a.writeable() ? a.mutable_data() : const_cast<void*>(a.data()));
    } else if (is_float(p->type.scalar)) {
      fps.push_back(pf.check.scalar_arg<double>(args[i], i));
    } else {
      ints.push_back(pf.check.scalar_arg<int64_t>(args[i], i));
    }
  }
  KernelEntry entry = pf.compiled->entry;
  if (groups > 0) {
    // The work-groups in contiguous ranges over the pool's workers; each call gets the group id
    // and count after the parameters' ints (the SIMD lowering's work_id).
    const size_t base = ints.size();
    ints.push_back(0);
    ints.push_back(groups);
    py::gil_scoped_release nogil;
    if (groups == 1) {
      entry(ptrs.data(), ints.data(), fps.data());
    } else {
      const int workers = static_cast<int>(std::min<int64_t>(ThreadPool::get().size(), groups));
      ThreadPool::get().run(workers, [&](int w) {
        std::vector<int64_t> mine = ints;
        const int64_t lo = groups * w / workers, hi = groups * (w + 1) / workers;
        for (int64_t g = lo; g < hi; ++g) {
          mine[base] = g;
          entry(ptrs.data(), mine.data(), fps.data());
        }
      });
    }
  }
  for (auto& cp : copies)
    if (cp.written) cp.src.attr("__setitem__")(py::ellipsis(), cp.copy);
}

}  // namespace

// A Python function (builder, row, col, value) -> value as a GEMM epilogue step (bind_gemm.cpp).
// It is called once, here, with a KernelBuilder on a function of its own (row, col, value
// parameters); the recipe then copies that IR into its per-element region (Builder::clone), so
// no Python runs while kernels are built (under the kernel cache's compile lock, where taking the
// GIL could deadlock with a thread that holds it and waits for that lock). `key` gets a hash of
// the IR (the kernel cache's key).
GemmEpilogue::ElementFn python_element_fn(const py::function& fn, ScalarType type, std::string& key) {
  auto shell = std::make_shared<PyFunction>();
  Function& probe = *shell->f;
  probe.name = "epilogue";
  Value* r = probe.add_param(Type::index(), "row");
  Value* c = probe.add_param(Type::index(), "col");
  Value* v = probe.add_param(Type::of(type), "value");
  PyBuilder ib{shell, Builder(probe)};
  py::object out;
  try {
    py::object kb = py::module_::import("coopjit.ir").attr("KernelBuilder")(py::arg("_inner") = py::make_tuple(ib, py::none()));
    out = fn(kb, ib.wrap(r), ib.wrap(c), ib.wrap(v));
  } catch (py::error_already_set& e) {
    // KeyboardInterrupt and SystemExit (BaseExceptions that are no Exception) go on as they are:
    // Ctrl-C while the function ran became "ValueError: the epilogue function raised KeyboardInterrupt".
    if (!e.matches(PyExc_Exception)) throw;
    throw UserError(cat("the epilogue function raised ", e.what()));
  }
  if (!py::isinstance<PyValue>(out))
    throw UserTypeError(cat("the epilogue function must return an IR value (the new element, ", name(type), "), got ",
                            std::string(py::repr(out))));
  Value* res = ib.unwrap(py::cast<PyValue>(out));
  if (!(res->type == Type::of(type)))
    throw UserTypeError(cat("the epilogue function must return a ", name(type), " value, got ", res->type.str()));
  if (probe.params.size() != 3)
    throw UserError("the epilogue function added kernel parameters: it can only use its row, col and value (and "
                    "constants)");
  key = xxh64_hex(cat(print(probe), " -> ", res->id));
  std::shared_ptr<const Function> body(shell, shell->f.get());  // the probe, kept by the returned function
  return [body, r, c, v, res](Builder& in, Value* row, Value* col, Value* value) -> Value* {
    std::map<const Value*, Value*> map{{r, row}, {c, col}, {v, value}};
    in.clone(body->body, map);
    auto it = map.find(res);
    COOPJIT_INTERNAL_ASSERT(it != map.end(), "the epilogue function's result");
    return it->second;
  };
}

// A Python decode function (SPV_NV_cooperative_matrix2 DecodeFunc; coopjit.tensor.load_matrix's
// decode=) as the tensor-access recipe's decode region, built as the epilogue's above: called once,
// here, on a function of its own whose parameters are the buffer, its extent, the element index
// and blockCoord / coordInBlock (rank each); coopjit.tensor._call_decode gives the user the
// builder, the block (a checked reader of the buffer from the index on) and the coordinates. The
// recipe copies the IR into its decode region; `key` gets a hash of it.
TensorAccessSpec::DecodeFn python_decode_fn(const py::function& fn, ScalarType buffer, ScalarType result, int rank,
                                            std::string& key) {
  auto shell = std::make_shared<PyFunction>();
  Function& probe = *shell->f;
  probe.name = "decode";
  Value* buf = probe.add_param(Type::pointer(buffer), "buf");
  Value* extent = probe.add_param(Type::index(), "extent");
  Value* index = probe.add_param(Type::index(), "index");
  std::vector<Value*> bc, cib;
  for (int d = 0; d < rank; ++d) bc.push_back(probe.add_param(Type::index(), cat("block", d)));
  for (int d = 0; d < rank; ++d) cib.push_back(probe.add_param(Type::index(), cat("in_block", d)));
  const size_t nparams = probe.params.size();
  PyBuilder ib{shell, Builder(probe)};
  py::object out;
  try {
    py::object kb = py::module_::import("coopjit.ir").attr("KernelBuilder")(py::arg("_inner") = py::make_tuple(ib, py::none()));
    out = py::module_::import("coopjit.tensor").attr("_call_decode")(fn, kb, ib.wrap(buf), ib.wrap(extent), ib.wrap(index),
                                                                     ib.wrap(bc), ib.wrap(cib), name(result));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_Exception)) throw;  // (KeyboardInterrupt, SystemExit: as they are)
    if (e.matches(PyExc_TypeError)) throw UserTypeError(cat("the decode function: ", e.what()));
    throw UserError(cat("the decode function raised ", e.what()));
  }
  if (!py::isinstance<PyValue>(out))
    throw UserTypeError(cat("the decode function must return an IR value (the element, ", name(result), "), got ",
                            std::string(py::repr(out))));
  Value* res = ib.unwrap(py::cast<PyValue>(out));
  if (!(res->type == Type::of(result)))
    throw UserTypeError(cat("the decode function must return a ", name(result), " value (the matrix's component type), got ",
                            res->type.str(), ": convert it with b.convert(value, '", name(result), "')"));
  if (probe.params.size() != nparams)
    throw UserError("the decode function added kernel parameters: it can only use the block, the coordinates and constants");
  key = xxh64_hex(cat(print(probe), " -> ", res->id));
  std::shared_ptr<const Function> body(shell, shell->f.get());
  std::vector<Value*> params = probe.params;
  return [body, params, res](Builder& in, Value* b, Value* e, Value* i, const std::vector<Value*>& bcs,
                             const std::vector<Value*>& cibs) -> Value* {
    std::map<const Value*, Value*> map{{params[0], b}, {params[1], e}, {params[2], i}};
    const size_t r = bcs.size();
    COOPJIT_INTERNAL_ASSERT(params.size() == 3 + 2 * r && cibs.size() == r, "decode rank");
    for (size_t d = 0; d < r; ++d) {
      map[params[3 + d]] = bcs[d];
      map[params[3 + r + d]] = cibs[d];
    }
    in.clone(body->body, map);
    auto it = map.find(res);
    if (it == map.end()) {  // the result is one of the parameters (e.g. an index returned as is)
      for (size_t k = 0; k < params.size(); ++k)
        if (params[k] == res) return map[params[k]];
      COOPJIT_INTERNAL_ASSERT(false, "the decode function's result");
    }
    return it->second;
  };
}

// The decode argument of the tensor-access bindings: "" (none), "blocked", or a Python function.
void set_decode(TensorAccessSpec& s, const py::object& decode) {
  if (decode.is_none()) return;
  if (py::isinstance<py::str>(decode)) {
    const std::string d = py::cast<std::string>(decode);
    if (d == "blocked") s.decode = TensorAccessSpec::Decode::blocked;
    else if (!d.empty()) throw UserError(cat("unknown decode '", d, "' (known: blocked, or a function)"));
    return;
  }
  if (!PyCallable_Check(decode.ptr()))
    throw UserTypeError(cat("decode must be None, 'blocked' or a function (b, block, block_coord, coord_in_block) -> "
                            "value, got ", std::string(py::repr(decode))));
  if (s.rank < 1 || s.rank > 5) throw UserError(cat("tensor layout rank ", s.rank, " is not in [1, 5]"));
  s.decode = TensorAccessSpec::Decode::user;
  s.user_decode = python_decode_fn(py::reinterpret_borrow<py::function>(decode), s.buffer_type(), s.dtype, s.rank,
                                   s.user_decode_key);
}

void bind_ir(py::module_& m) {
  py::class_<PyValue>(m, "IRValue")
      .def_property_readonly("type", &PyValue::type)
      .def("__repr__", [](const PyValue& v) { return cat("<IRValue ", v.v->hint.empty() ? "%" + std::to_string(v.v->id) : "%" + v.v->hint, " : ", v.type(), ">"); });

  py::class_<ArgCheck, std::shared_ptr<ArgCheck>>(m, "_ArgCheck")
      .def("check", [](const ArgCheck& c, const py::sequence& args, int64_t groups) {
        // The parameters the kernel writes (for the copies back), after the checks.
        std::vector<bool> written;
        std::vector<ParamExtent> scratch;
        for (const auto& e : c.check(args, groups, scratch)) written.push_back(e.written);
        return written;
      }, py::arg("args"), py::arg("groups"))
      .def("extents", [](const ArgCheck& c) {
        py::list out;
        for (const auto& e : c.fixed) {
          py::dict d;
          d["read"] = e.read; d["written"] = e.written; d["touched"] = e.touched; d["bounded"] = e.bounded;
          d["lo"] = e.lo; d["hi"] = e.hi;
          out.append(d);
        }
        return out;
      }, "The compile-time extents by parameter (bounded False: evaluated at each call).");

  py::class_<PyFunction, std::shared_ptr<PyFunction>>(m, "IRFunction")
      .def("text", [](const PyFunction& f) { return print(*f.f); })
      .def("verify", [](const PyFunction& f) { verify(*f.f); })
      .def("compile", [](PyFunction& f) {
        ArgCheck check;
        check.init(*f.f, f.name, 1, 1, false);  // refuses an access it cannot bound before anything is built
        f.compiled = cached_kernel(*f.f);
        f.check = std::move(check);
      })
      .def("device_check", [](const std::shared_ptr<PyFunction>& f, int64_t subgroup_size, int64_t work_group_size) {
        auto c = std::make_shared<ArgCheck>();
        c->init(*f->f, f->name, subgroup_size, work_group_size, true);
        c->keep = f;
        return c;
      }, py::arg("subgroup_size"), py::arg("work_group_size"),
         "The argument check of the kernel compiled for a device (ArgCheck).")
      .def("source", [](const PyFunction& f, const std::string& kind) {
        if (!f.compiled) throw UserError("compile the kernel first");
        if (kind == "ir") return f.compiled->ir_text;
        if (kind == "llvm") return f.compiled->llvm_ir;
        if (kind == "asm") return f.compiled->assembly();
        throw UserError(cat("unknown source kind '", kind, "' (known: ir, llvm, asm)"));
      })
      .def("run", &run_custom, py::arg("groups") = py::none())
      .def("reads_groups", [](const PyFunction& f) { return reads_groups(f.f->body); },
           "Whether the kernel reads work-group ids (its calls need groups=).")
      .def("extents", [](const PyFunction& f) {
        if (!f.compiled) throw UserError("compile the kernel first");
        py::list out;
        for (const auto& e : f.check.fixed) {
          py::dict d;
          d["read"] = e.read; d["written"] = e.written; d["touched"] = e.touched; d["bounded"] = e.bounded;
          d["lo"] = e.lo; d["hi"] = e.hi;
          out.append(d);
        }
        return out;
      }, "The compile-time extents by parameter (bounded False: evaluated at each call).")
      .def("compile_device", [](PyFunction& f, const std::string& device) {
        py::gil_scoped_release nogil;
        return std::const_pointer_cast<DeviceProgram>(device_program(device, *f.f));
      }, py::arg("device"), "Verifies, lowers (SIMT) and builds the kernel for a SPIR-V device (bind_gpu.cpp).");

  m.def("op_probe_names", [] { return op_probe_names(); },
        "The operation probes of SPV_NV_cooperative_matrix2 and HLSL 0035 (build/op_probes.h).");
  m.def("op_support", [](const std::string& probe, const std::string& target) {
    py::gil_scoped_release nogil;
    return op_support(probe, target);
  }, py::arg("probe"), py::arg("target"), "'' when the target (cpu, spirv, ptx) builds the probe, else why not.");
  m.def("op_probe_ir", [](const std::string& name, int subgroup_size) { return print(*build_op_probe(name, subgroup_size)); },
        py::arg("name"), py::arg("subgroup_size"), "The printed IR of one operation probe.");
  // The tensor-access recipe (build/tensor_recipe.h) as a kernel for a device: coopjit.tensor's
  // load_matrix / store_matrix with device= compile and launch it as any user kernel.
  m.def(
      "tensor_access_function",
      [](bool store, const std::string& dtype, int64_t rows, int64_t cols, const std::string& clamp, int rank,
         int view_kind, const std::vector<int>& perm, const py::object& decode, int subgroup_size, int subgroups,
         const std::string& buffer_dtype) {
        TensorAccessSpec s;
        s.store = store;
        s.dtype = parse_scalar(dtype);
        if (!buffer_dtype.empty()) {
          s.buffer_dtype = parse_scalar(buffer_dtype);
          s.buffer_dtype_set = true;
        }
        s.rows = rows;
        s.cols = cols;
        s.clamp = parse_clamp(clamp);
        s.rank = rank;
        if (view_kind < 0 || view_kind > 2) throw UserError(cat("view_kind ", view_kind, " must be 0, 1 or 2"));
        s.view = static_cast<TensorAccessSpec::View>(view_kind);
        s.view_rank = static_cast<int>(perm.size());
        for (size_t i = 0; i < perm.size() && i < 5; ++i) s.perm[i] = static_cast<int8_t>(perm[i]);
        set_decode(s, decode);
        s.validate();
        auto fn = std::make_shared<PyFunction>();
        fn->name = "tensor_access";
        if (subgroups < 1 || subgroups > 64) throw UserError(cat("subgroups ", subgroups, " must be in [1, 64]"));
        fn->f = build_tensor_access(s, subgroup_size, cat("tensor_access_", xxh64_hex(s.key()), "_", subgroups), subgroups);
        return fn;
      },
      py::arg("store"), py::arg("dtype"), py::arg("rows"), py::arg("cols"), py::arg("clamp"), py::arg("rank"),
      py::arg("view_kind"), py::arg("perm"), py::arg("decode"), py::arg("subgroup_size"), py::arg("subgroups") = 1,
      py::arg("buffer_dtype") = "",
      "The tensor-access kernel's IR function (parameters: buf, mat, extent, mat strides, the layout's "
      "fields, clamp_value, the view's fields) for compile_device.");

  py::class_<PyBuilder>(m, "IRBuilder")
      .def_static("create", [](const std::string& name, int64_t subgroup_size, int64_t subgroups) {
        if (subgroup_size < 1 || subgroup_size > 64 || (subgroup_size & (subgroup_size - 1)))
          throw UserError(cat("subgroup_size ", subgroup_size, " must be a power of two in [1, 64]"));
        if (subgroups < 1 || subgroups * subgroup_size > 1024)
          throw UserError(cat("subgroups ", subgroups, " must be >= 1 with at most 1024 work-items a work-group (subgroup_size ",
                              subgroup_size, ")"));
        auto fn = std::make_shared<PyFunction>();
        fn->f->name = name;
        fn->name = name;
        fn->f->attrs["subgroup_size"] = subgroup_size;
        if (subgroups > 1) fn->f->attrs["subgroups_per_group"] = subgroups;
        return std::make_pair(PyBuilder{fn, Builder(*fn->f)}, fn);
      })
      .def("param", [](PyBuilder& b, const std::string& name, const std::string& type) {
        return b.wrap(b.fn->f->add_param(parse_type(type), name));
      })
      .def("work_id", [](PyBuilder& b, const std::string& kind, int dim) {
        static const std::pair<const char*, WorkId> ids[] = {{"lane", WorkId::lane}, {"subgroup", WorkId::subgroup},
                                                             {"subgroups", WorkId::subgroups}, {"group", WorkId::group},
                                                             {"groups", WorkId::groups}};
        for (auto& [n, w] : ids)
          if (kind == n) return b.wrap(b.b.work_id(w, dim));
        throw UserError(cat("unknown work id '", kind, "' (known: lane, subgroup, subgroups, group, groups)"));
      }, py::arg("kind"), py::arg("dim") = 0)
      .def("index", [](PyBuilder& b, int64_t v) { return b.wrap(b.b.index(v)); })
      .def("constant", [](PyBuilder& b, const py::object& v, const std::string& t) {
        return b.wrap(make_constant(b.b, v, parse_scalar(t)));
      })
      .def("binary", [](PyBuilder& b, const std::string& op, const PyValue& x, const PyValue& y) {
        return b.wrap(b.b.bin(parse_bin(op), b.unwrap(x), b.unwrap(y)));
      })
      .def("cmp", [](PyBuilder& b, const std::string& p, const PyValue& x, const PyValue& y) {
        return b.wrap(b.b.cmp(parse_cmp(p), b.unwrap(x), b.unwrap(y)));
      })
      .def("select", [](PyBuilder& b, const PyValue& c, const PyValue& x, const PyValue& y) {
        return b.wrap(b.b.select(b.unwrap(c), b.unwrap(x), b.unwrap(y)));
      })
      .def("unary", [](PyBuilder& b, const std::string& op, const PyValue& x) { return b.wrap(b.b.unary(parse_un(op), b.unwrap(x))); })
      .def("convert", [](PyBuilder& b, const PyValue& x, const std::string& t) { return b.wrap(b.b.convert(b.unwrap(x), parse_scalar(t))); })
      .def("load_scalar", [](PyBuilder& b, const PyValue& p, const PyValue& i) {
        // Unchecked: for coopjit.tensor's decode blocks, which guard the index themselves.
        return b.wrap(b.b.load_scalar(b.unwrap(p), b.unwrap(i)));
      })
      .def("ptr_offset", [](PyBuilder& b, const PyValue& p, const PyValue& n) { return b.wrap(b.b.ptr_offset(b.unwrap(p), b.unwrap(n))); })
      .def("flag_set", [](PyBuilder& b, const PyValue& p, const PyValue& i, const std::optional<PyValue>& v) {
        b.b.flag_set(b.unwrap(p), b.unwrap(i), v ? b.unwrap(*v) : nullptr);
      }, py::arg("flags"), py::arg("i"), py::arg("value") = py::none())
      .def("flag_wait", [](PyBuilder& b, const PyValue& p, const PyValue& i, int64_t spin_limit) {
        if (spin_limit < 0) throw UserError(cat("flag_wait: spin_limit must be >= 0 (0: no limit), got ", spin_limit));
        b.b.flag_wait(b.unwrap(p), b.unwrap(i), spin_limit);
      }, py::arg("flags"), py::arg("i"), py::arg("spin_limit") = 0)
      .def("for_", [](PyBuilder& b, const PyValue& lb, const PyValue& ub, const PyValue& step, const std::vector<PyValue>& inits,
                      const py::function& body) {
        return b.wrap(b.b.for_(b.unwrap(lb), b.unwrap(ub), b.unwrap(step), b.unwrap(inits),
                               [&](Builder& in, Value* iv, const std::vector<Value*>& it) {
                                 PyBuilder ib = b.inner(in);
                                 py::object r = body(ib, ib.wrap(iv), ib.wrap(it));
                                 return ib.unwrap(r.is_none() ? std::vector<PyValue>{} : py::cast<std::vector<PyValue>>(r));
                               }));
      })
      .def("if_", [](PyBuilder& b, const PyValue& cond, const std::vector<std::string>& types, const py::function& then_fn,
                     const py::object& else_fn) {
        std::vector<Type> ts;
        for (const auto& t : types) ts.push_back(parse_type(t));
        auto arm = [&](const py::object& fn) -> Builder::IfBody {
          if (fn.is_none()) return {};
          return [&b, fn](Builder& in) {
            PyBuilder ib = b.inner(in);
            py::object r = fn(ib);
            return ib.unwrap(r.is_none() ? std::vector<PyValue>{} : py::cast<std::vector<PyValue>>(r));
          };
        };
        return b.wrap(b.b.if_(b.unwrap(cond), ts, arm(then_fn), arm(else_fn)));
      })
      .def("load", [](PyBuilder& b, const std::string& type, const std::vector<PyValue>& access, bool checked) {
        if (access.size() != 7) throw UserError("load takes (ptr, row, col, stride_row, stride_col, rows, cols)");
        auto a = b.unwrap(access);
        return b.wrap(b.b.load(parse_type(type), {a[0], a[1], a[2], a[3], a[4], a[5], a[6]}, checked));
      })
      .def("store", [](PyBuilder& b, const PyValue& m, const std::vector<PyValue>& access, bool checked) {
        if (access.size() != 7) throw UserError("store takes (ptr, row, col, stride_row, stride_col, rows, cols)");
        auto a = b.unwrap(access);
        b.b.store(b.unwrap(m), {a[0], a[1], a[2], a[3], a[4], a[5], a[6]}, checked);
      })
      .def("groupshared", [](PyBuilder& b, const std::string& dtype, int64_t n) {
        if (n < 1) throw UserError(cat("a groupshared array has at least one element, got ", n));
        return b.wrap(b.b.groupshared(parse_scalar(dtype), n));
      })
      .def("barrier", [](PyBuilder& b) { b.b.barrier(); })
      .def("load_element", [](PyBuilder& b, const PyValue& p, const PyValue& i) {
        return b.wrap(b.b.load_scalar(b.unwrap(p), b.unwrap(i)));
      })
      .def("store_element", [](PyBuilder& b, const PyValue& p, const PyValue& i, const PyValue& v) {
        b.b.store_scalar(b.unwrap(p), b.unwrap(i), b.unwrap(v));
      })
      .def("accumulate", [](PyBuilder& b, const PyValue& m, const std::vector<PyValue>& access) {
        if (access.size() != 7) throw UserError("accumulate takes (ptr, row, col, stride_row, stride_col, rows, cols)");
        auto a = b.unwrap(access);
        b.b.accumulate(b.unwrap(m), {a[0], a[1], a[2], a[3], a[4], a[5], a[6]});
      })
      .def("splat", [](PyBuilder& b, const std::string& type, const PyValue& s) { return b.wrap(b.b.splat(parse_type(type), b.unwrap(s))); })
      .def("mul_add", [](PyBuilder& b, const PyValue& a, const PyValue& x, const PyValue& c) {
        return b.wrap(b.b.mul_add(b.unwrap(a), b.unwrap(x), b.unwrap(c)));
      })
      .def("scale", [](PyBuilder& b, const PyValue& m, const PyValue& s) { return b.wrap(b.b.scale(b.unwrap(m), b.unwrap(s))); })
      .def("matrix_binary", [](PyBuilder& b, const std::string& op, const PyValue& x, const PyValue& y) {
        return b.wrap(b.b.mat_bin(parse_bin(op), b.unwrap(x), b.unwrap(y)));
      })
      .def("reduce", [](PyBuilder& b, const PyValue& m, const std::string& mode, const std::string& result,
                        const py::object& combine) {
        if (py::isinstance<py::str>(combine)) {
          std::string c = py::cast<std::string>(combine);
          if (c != "add" && c != "mul" && c != "min" && c != "max")
            throw UserError(cat("unknown combine '", c, "' (known: add, mul, min, max, or a function)"));
          return b.wrap(b.b.reduce(b.unwrap(m), parse_mode(mode), parse_type(result), parse_bin(c)));
        }
        py::function fn = py::cast<py::function>(combine);
        return b.wrap(b.b.reduce(b.unwrap(m), parse_mode(mode), parse_type(result), [&](Builder& in, Value* x, Value* y) {
          PyBuilder ib = b.inner(in);
          return ib.unwrap(py::cast<PyValue>(fn(ib, ib.wrap(x), ib.wrap(y))));
        }));
      })
      .def("per_element", [](PyBuilder& b, const PyValue& m, const std::vector<PyValue>& extras, const py::function& fn) {
        return b.wrap(b.b.per_element(b.unwrap(m), b.unwrap(extras),
                                      [&](Builder& in, Value* r, Value* c, Value* v, const std::vector<Value*>& xs) {
                                        PyBuilder ib = b.inner(in);
                                        py::list args;
                                        args.append(ib);
                                        args.append(ib.wrap(r));
                                        args.append(ib.wrap(c));
                                        args.append(ib.wrap(v));
                                        for (Value* x : xs) args.append(ib.wrap(x));
                                        return ib.unwrap(py::cast<PyValue>(fn(*args)));
                                      }));
      })
      .def("convert_matrix", [](PyBuilder& b, const PyValue& m, const std::string& type, bool cast) {
        return b.wrap(b.b.convert_matrix(b.unwrap(m), parse_type(type), cast));
      })
      .def("transpose", [](PyBuilder& b, const PyValue& m) { return b.wrap(b.b.transpose(b.unwrap(m))); })
      .def("length", [](PyBuilder& b, const PyValue& m) { return b.wrap(b.b.length(b.unwrap(m))); })
      .def("get", [](PyBuilder& b, const PyValue& m, const PyValue& i) { return b.wrap(b.b.get(b.unwrap(m), b.unwrap(i))); })
      .def("set", [](PyBuilder& b, const PyValue& m, const PyValue& i, const PyValue& v) {
        return b.wrap(b.b.set(b.unwrap(m), b.unwrap(i), b.unwrap(v)));
      })
      .def("get_coordinate", [](PyBuilder& b, const PyValue& m, const PyValue& i) {
        auto [r, c] = b.b.get_coordinate(b.unwrap(m), b.unwrap(i));
        return std::make_pair(b.wrap(r), b.wrap(c));
      })
      .def("sum_accumulate", [](PyBuilder& b, const PyValue& a, const PyValue& x, const PyValue& c) {
        return b.wrap(b.b.sum_accumulate(b.unwrap(a), b.unwrap(x), b.unwrap(c)));
      })
      .def("outer_product", [](PyBuilder& b, const PyValue& x, const PyValue& y, const std::string& result) {
        return b.wrap(b.b.outer_product(b.unwrap(x), b.unwrap(y), parse_type(result)));
      })
      .def("vector_multiply", [](PyBuilder& b, const PyValue& v, const PyValue& m, const std::optional<PyValue>& bias,
                                 const std::string& result) {
        return b.wrap(b.b.vector_multiply(b.unwrap(v), b.unwrap(m), bias ? b.unwrap(*bias) : nullptr, parse_type(result)));
      })
      .def("vector_load", [](PyBuilder& b, const std::string& type, const PyValue& p, const PyValue& off, const PyValue& stride) {
        return b.wrap(b.b.vector_load(parse_type(type), b.unwrap(p), b.unwrap(off), b.unwrap(stride)));
      })
      .def("vector_store", [](PyBuilder& b, const PyValue& v, const PyValue& p, const PyValue& off, const PyValue& stride) {
        b.b.vector_store(b.unwrap(v), b.unwrap(p), b.unwrap(off), b.unwrap(stride));
      });
}
