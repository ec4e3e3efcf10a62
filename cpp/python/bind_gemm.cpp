// Python bindings of GEMM: compile (spec -> plan -> code), run on NumPy arrays, show the code.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "runtime/gemm.h"
#include "runtime/tuned_plans.h"
#include "target/cpu_info.h"

namespace py = pybind11;
using namespace coopjit;

// bind_ir.cpp: a Python per-element function as an epilogue step.
coopjit::GemmEpilogue::ElementFn python_element_fn(const py::function& fn, coopjit::ir::ScalarType type, std::string& key);

namespace {

using Types = std::array<std::string, 3>;  // IR names of the element types of a, b, c

// Checks that an array's element size fits the IR type the Python layer named for it.
ir::ScalarType type_of(const py::array& x, const std::string& name, const char* what) {
  ir::ScalarType t = ir::parse_scalar(name);
  if (x.itemsize() != ir::size_in_bytes(t))
    throw UserTypeError(cat(what, " has ", x.itemsize(), "-byte elements but was given as ", name));
  return t;
}

// Element strides of an array whose last two dims are the matrix and whose leading 0 to 2 dims
// are the batch; the Python layer makes sure they are whole elements (it copies otherwise).
std::vector<int64_t> strides_of(const py::array& x, const char* what) {
  if (x.ndim() < 2 || x.ndim() > 4)
    throw UserError(cat(what, " must have 2 to 4 dims (batch dims, then the matrix), got ", x.ndim()));
  const int64_t item = x.itemsize();
  std::vector<int64_t> s;
  for (int d = 0; d < x.ndim(); ++d) {
    if (x.strides(d) % item)
      throw UserError(cat(what, " has byte stride ", x.strides(d), " in dim ", d, ", not a multiple of its itemsize ",
                          item));
    s.push_back(x.strides(d) / item);
  }
  if (reinterpret_cast<uintptr_t>(x.data()) % item)
    throw UserError(cat(what, " (shape ", x.shape(0), " x ", x.shape(1), "...) at address ", x.data(),
                        " is not aligned to its itemsize ", item));
  return s;
}

// The spec of C = op(A) op(B) (+ C) for arrays a (... x M x K), b (... x K x N), c (... x M x N)
// with one batch shape (broadcasting is done by the caller with zero strides); they are already
// the operands as the kernel reads them (transposes are views made by the caller).
GemmSpec spec_of(const py::array& a, const py::array& b, const py::array& c, bool accumulate, const Types& types,
                 bool epilogue = false) {
  GemmSpec s;
  if (epilogue)
    s.set_types_with_epilogue(type_of(a, types[0], "a"), type_of(b, types[1], "b"), type_of(c, types[2], "c"));
  else
    s.set_types(type_of(a, types[0], "a"), type_of(b, types[1], "b"), type_of(c, types[2], "c"));
  auto sa = strides_of(a, "a"), sb = strides_of(b, "b"), sc = strides_of(c, "c");
  const int nd = static_cast<int>(a.ndim());
  if (b.ndim() != nd || c.ndim() != nd)
    throw UserError(cat("a, b and c must have the same number of dims, got ", nd, ", ", b.ndim(), ", ", c.ndim()));
  for (int d = 0; d < nd - 2; ++d)
    if (b.shape(d) != a.shape(d) || c.shape(d) != a.shape(d))
      throw UserError(cat("batch dim ", d, " differs: a ", a.shape(d), ", b ", b.shape(d), ", c ", c.shape(d)));
  s.M = a.shape(nd - 2);
  s.K = a.shape(nd - 1);
  s.N = b.shape(nd - 1);
  if (b.shape(nd - 2) != s.K || c.shape(nd - 2) != s.M || c.shape(nd - 1) != s.N)
    throw UserError(cat("shapes do not match: a (", s.M, ", ", s.K, "), b (", b.shape(nd - 2), ", ", s.N, "), c (",
                        c.shape(nd - 2), ", ", c.shape(nd - 1), ")"));
  if (!c.writeable()) throw UserError("c (the output) is read-only");
  s.sa_r = sa[nd - 2]; s.sa_c = sa[nd - 1];
  s.sb_r = sb[nd - 2]; s.sb_c = sb[nd - 1];
  s.sc_r = sc[nd - 2]; s.sc_c = sc[nd - 1];
  if (nd >= 3) {  // the innermost batch dim
    s.batch2 = a.shape(nd - 3);
    s.sa_b2 = sa[nd - 3]; s.sb_b2 = sb[nd - 3]; s.sc_b2 = sc[nd - 3];
  }
  if (nd == 4) {
    s.batch1 = a.shape(0);
    s.sa_b1 = sa[0]; s.sb_b1 = sb[0]; s.sc_b1 = sc[0];
  }
  s.accumulate = accumulate;
  return s;
}

// matmul_fast's dtype rules (the Python layer's gemm_types for the common cases): the IR types
// of a, b and the default C, and whether a float32 `out` is allowed (16-bit float inputs).
struct FastTypes {
  bool ok = false;
  ir::ScalarType a{}, b{}, c{};
  py::dtype c_dtype;
  bool f32_out_allowed = false;
};

FastTypes fast_types(const py::dtype& da, const py::dtype& db) {
  FastTypes r;
  if (da.byteorder() == '>' || db.byteorder() == '>') return r;
  // ml_dtypes' types, looked up once (none when ml_dtypes is not installed). Not a function-local
  // static: importing ml_dtypes lets other threads run Python, and one of them calling matmul would
  // wait on the static's guard holding the GIL that the import needs back (a deadlock seen with 8
  // threads' first matmuls in test_threads); pybind's once-store waits with the GIL released.
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<std::array<py::object, 3>> ml_store;
  const std::array<py::object, 3>& ml = ml_store.call_once_and_store_result([] {
    std::array<py::object, 3> out{py::none(), py::none(), py::none()};
    try {
      py::module_ m = py::module_::import("ml_dtypes");
      out = {py::dtype::from_args(m.attr("bfloat16")), py::dtype::from_args(m.attr("float8_e4m3fn")),
             py::dtype::from_args(m.attr("float8_e5m2"))};
    } catch (const py::error_already_set&) {
    }
    return out;
  }).get_stored();
  auto byte = [](const py::dtype& d) { return (d.kind() == 'i' || d.kind() == 'u') && d.itemsize() == 1; };
  if (byte(da) && byte(db)) {
    r.a = da.kind() == 'i' ? ir::ScalarType::i8 : ir::ScalarType::u8;
    r.b = db.kind() == 'i' ? ir::ScalarType::i8 : ir::ScalarType::u8;
    r.c = ir::ScalarType::i32;
    r.c_dtype = py::dtype::of<int32_t>();
    r.ok = true;
    return r;
  }
  if (!da.is(db) && !da.equal(db)) return r;
  // NumPy's own floats first (type numbers below NPY_USERDEF, 256; ml_dtypes' are user types from
  // 256 on): comparing a float32 dtype with ml_dtypes' three (a cast lookup each) took 0.2-0.3 us
  // apiece, most of a small product's call.
  const int num = da.num();
  if (num == 23 || num == 11 || num == 12) {  // NPY_HALF, NPY_FLOAT, NPY_DOUBLE
    r.a = r.b = r.c = num == 23 ? ir::ScalarType::f16 : num == 11 ? ir::ScalarType::f32 : ir::ScalarType::f64;
    r.c_dtype = da;
    r.f32_out_allowed = num == 23;
    r.ok = true;
    return r;
  }
  for (int i = 0; i < 3; ++i) {
    if (ml[i].is_none() || !da.equal(py::reinterpret_borrow<py::dtype>(ml[i]))) continue;
    if (i == 0) {  // bfloat16: bfloat16 or float32 out
      r.a = r.b = r.c = ir::ScalarType::bf16;
      r.c_dtype = da;
      r.f32_out_allowed = true;
    } else {  // float8: float32 out
      r.a = r.b = i == 1 ? ir::ScalarType::f8_e4m3 : ir::ScalarType::f8_e5m2;
      r.c = ir::ScalarType::f32;
      r.c_dtype = py::dtype::of<float>();
    }
    r.ok = true;
    return r;
  }
  return r;
}

// The steps of a fused epilogue from Python's description (coopjit._epilogue): a dict with
// "scale", "row_scale", "residual" (present when not None), "bias" (None or present, with
// "bias_axis" 1: per column, 0: per row), "activation" ("" or a name), "fn" (None or a callable).
GemmEpilogue epilogue_of(const py::dict& d, ir::ScalarType type) {
  GemmEpilogue e;
  e.type = type;
  auto has = [&](const char* k) { return d.contains(k) && !d[k].is_none() && !(py::isinstance<py::bool_>(d[k]) && !py::cast<bool>(d[k])); };
  e.scale = has("scale");
  e.row_scale = has("row_scale");
  e.residual = has("residual");
  if (has("bias")) {
    const int axis = d.contains("bias_axis") ? py::cast<int>(d["bias_axis"]) : 1;
    if (axis != 0 && axis != 1) throw UserError(cat("bias_axis must be 0 (a vector of M, per row) or 1 (of N, per column), got ", axis));
    e.bias = axis == 1 ? 1 : 2;
  }
  if (d.contains("activation") && !d["activation"].is_none()) {
    e.activation = py::cast<std::string>(d["activation"]);
    static const char* known[] = {"", "relu", "gelu", "gelu_tanh", "silu", "sigmoid", "tanh"};
    bool ok = false;
    for (const char* k : known) ok = ok || e.activation == k;
    if (!ok)
      throw UserError(cat("unknown activation '", e.activation, "' (known: relu, gelu, gelu_tanh, silu, sigmoid, tanh)"));
  }
  if (has("fn")) {
    py::object f = d["fn"];
    if (!PyCallable_Check(f.ptr())) throw UserTypeError(cat("epilogue must be a function (builder, row, col, value) -> value, got ", std::string(py::repr(f))));
    e.fn = python_element_fn(py::reinterpret_borrow<py::function>(f), type, e.fn_key);
  }
  return e;
}

// The epilogue's operands of one call, checked against the product (the vectors contiguous in
// the epilogue's type with N or M elements, the residual with C's shape and element strides).
EpilogueArgs epilogue_args(const py::dict& d, const GemmEpilogue& e, const GemmSpec& s, const py::array& c) {
  EpilogueArgs out;
  const size_t esize = ir::size_in_bytes(e.type);
  auto vec = [&](const char* k, int64_t n, const char* what) -> const void* {
    if (!d.contains(k) || d[k].is_none() || py::isinstance<py::bool_>(d[k]))
      throw UserError(cat("this kernel's epilogue takes ", k, "= (", what, "), which was not given"));
    auto v = py::cast<py::array>(d[k]);
    if (v.ndim() != 1 || v.shape(0) != n || size_t(v.itemsize()) != esize || !(v.flags() & py::array::c_style))
      throw UserError(cat(k, " must be a contiguous vector of ", n, " ", ir::name(e.type), " (", what, "), got ", v.ndim(),
                          "-D with ", v.size(), " elements of ", v.itemsize(), " bytes"));
    return v.data();
  };
  if (e.scale) out.scale = vec("scale", s.N, "a value per column");
  if (e.row_scale) out.row_scale = vec("row_scale", s.M, "a value per row");
  if (e.bias) out.bias = vec("bias", e.bias == 1 ? s.N : s.M, e.bias == 1 ? "a value per column" : "a value per row");
  if (e.residual) {
    if (!d.contains("residual") || d["residual"].is_none() || py::isinstance<py::bool_>(d["residual"]))
      throw UserError("this kernel's epilogue takes residual= (an M x N array), which was not given");
    auto r = py::cast<py::array>(d["residual"]);
    bool same = r.ndim() == c.ndim() && size_t(r.itemsize()) == esize;
    for (py::ssize_t i = 0; same && i < r.ndim(); ++i)
      same = r.shape(i) == c.shape(i) && (r.shape(i) == 1 || r.strides(i) / r.itemsize() == c.strides(i) / c.itemsize()) &&
             r.strides(i) % r.itemsize() == 0;
    if (!same) throw InternalError("the residual must have C's shape and element strides in the epilogue's type");
    out.residual = r.data();
  }
  return out;
}

// The bytes an array's elements span, [lo, hi): operands apart from the output are those whose
// ranges do not meet (conservatively, as numpy.may_share_memory's bounds check).
std::pair<uintptr_t, uintptr_t> byte_range(const py::array& x) {
  auto lo = reinterpret_cast<uintptr_t>(x.data()), hi = lo;
  for (int d = 0; d < x.ndim(); ++d) {
    const int64_t span = (x.shape(d) - 1) * x.strides(d);
    (span < 0 ? lo : hi) += span;
  }
  return {lo, hi + x.itemsize()};
}

bool ranges_meet(const std::pair<uintptr_t, uintptr_t>& x, const std::pair<uintptr_t, uintptr_t>& y) {
  return x.first < y.second && y.first < x.second;
}

// An exact numpy.ndarray (subclasses take the Python paths).
bool is_ndarray(py::handle h) {
  static PyTypeObject* ndarray = reinterpret_cast<PyTypeObject*>(py::module_::import("numpy").attr("ndarray").ptr());
  return Py_TYPE(h.ptr()) == ndarray;
}

// Exactly the layout of a C-contiguous rows x cols matrix (the strides of dims of length 1 too,
// which NumPy's flags do not look at: a kernel's plan does).
bool row_major(const py::array& x) {
  const auto item = static_cast<int64_t>(x.itemsize());
  return x.ndim() == 2 && x.strides(1) == item && x.strides(0) == x.shape(1) * item;
}

// Aligned to its element size: the data pointer and every stride.
bool aligned(const py::array& x) {
  const auto item = static_cast<int64_t>(x.itemsize());
  if (reinterpret_cast<uintptr_t>(x.data()) % static_cast<uintptr_t>(item)) return false;
  for (int d = 0; d < x.ndim(); ++d)
    if (x.strides(d) % item) return false;
  return true;
}

struct PyGemmKernel {
  GemmKernel k;
  PlanOverrides overrides;  // the ones applied: the caller's, or the tuned plan's
  Types types;
  bool tuned = false;  // the plan came from the tuning database
  // call_fast's dtypes of the inputs and of C (null: no fast path; set by the Python Kernel of an
  // untransposed product without an epilogue).
  py::object fast_in{}, fast_out{};

  static bool same_dtype(const py::array& x, const py::object& want) {
    const py::dtype d = x.dtype();
    return d.is(want) || (d.byteorder() != '>' && d.equal(want));
  }

  // The per-call fast path of Kernel.__call__: exactly numpy.ndarray operands of the compiled
  // dtype, shapes and layout (C-contiguous), aligned; C of the compiled output dtype, shape and
  // layout, writeable, aligned and apart from the inputs, or None for a new one; alpha a float or
  // an int of at most 2^53 in magnitude, beta 0. Returns C, or
  // None whenever anything is out of the ordinary: Python's full path then checks, copies and
  // gives the errors. (The same conditions Python tested, at a fraction of the cost: a 4x4x4
  // call took 2.9 us through them against matmul's 0.8.)
  py::object call_fast(py::handle ha, py::handle hb, py::handle hc, py::handle halpha, py::handle hbeta) const {
    if (!fast_in || !is_ndarray(ha) || !is_ndarray(hb) || (!hc.is_none() && !is_ndarray(hc))) return py::none();
    double alpha = 0.0;
    if (PyFloat_CheckExact(halpha.ptr())) {
      alpha = PyFloat_AS_DOUBLE(halpha.ptr());
    } else if (PyLong_CheckExact(halpha.ptr())) {
      alpha = PyLong_AsDouble(halpha.ptr());
      if (alpha == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();  // too large for a double: the full path says so
        return py::none();
      }
      // From 2^53 on a double may have rounded it: integer products take it exactly (the full path's
      // _arrays.int_scalar), float products round it there as here.
      if (std::fabs(alpha) >= 9007199254740992.0) return py::none();
    } else {
      return py::none();
    }
    const bool beta_zero = (PyFloat_CheckExact(hbeta.ptr()) && PyFloat_AS_DOUBLE(hbeta.ptr()) == 0.0) ||
                           (PyLong_CheckExact(hbeta.ptr()) && PyLong_AsLong(hbeta.ptr()) == 0 && !PyErr_Occurred());
    if (PyErr_Occurred()) PyErr_Clear();
    if (!beta_zero) return py::none();
    auto a = py::reinterpret_borrow<py::array>(ha);
    auto b = py::reinterpret_borrow<py::array>(hb);
    const int64_t M = k.spec.M, N = k.spec.N, K = k.spec.K;
    if (a.ndim() != 2 || b.ndim() != 2 || a.shape(0) != M || a.shape(1) != K || b.shape(0) != K || b.shape(1) != N ||
        !same_dtype(a, fast_in) || !same_dtype(b, fast_in) || !aligned(a) || !aligned(b) || !row_major(a) ||
        !row_major(b))
      return py::none();
    py::array c;
    if (hc.is_none()) {
      c = py::array(py::reinterpret_borrow<py::dtype>(fast_out), std::vector<py::ssize_t>{M, N});
    } else {
      c = py::reinterpret_borrow<py::array>(hc);
      if (c.ndim() != 2 || c.shape(0) != M || c.shape(1) != N || !same_dtype(c, fast_out) || !c.writeable() ||
          !aligned(c) || !row_major(c))
        return py::none();
      const auto rc = byte_range(c);
      if (ranges_meet(rc, byte_range(a)) || ranges_meet(rc, byte_range(b))) return py::none();
    }
    if (M * N > 0) run(a, b, c, alpha, 0.0);
    return py::object(std::move(c));  // (a py::array: named, so not moved implicitly by every compiler)
  }

  void run(const py::array& a, const py::array& b, py::array& c, double alpha, double beta,
           const py::object& epilogue = py::none()) const {
    GemmSpec s = spec_of(a, b, c, k.spec.accumulate, types, k.spec.epilogue.any());
    s.epilogue = k.spec.epilogue;
    // K = 0: A and B hold no elements, and NumPy gives their empty dims stride 0; nothing reads
    // them, so they count as the strides the kernel was compiled for (a kernel of K = 0 refused
    // its own contiguous operands: session 20's audit).
    if (s.K == 0 && k.spec.K == 0) {
      s.sa_r = k.spec.sa_r; s.sa_c = k.spec.sa_c;
      s.sb_r = k.spec.sb_r; s.sb_c = k.spec.sb_c;
    }
    // beta = 0: C is not read (BLAS; gemm, whose kernel then has no beta, and the bf16 split). A
    // kernel compiled with accumulate computes beta * C all the same, so NaN or inf in C (or
    // the uninitialised copy Kernel.__call__ writes into) came through as NaN: C is zeroed
    // first (once the operands are known to fit this kernel), after a residual in C's own memory
    // (residual=c) is copied out of it (session 22's audit).
    const bool zero_c = k.spec.accumulate && beta == 0.0 && c.size() > 0;
    auto clear_c = [&c] {  // all-zero bytes: 0 in every output type
      if (c.flags() & py::array::c_style)
        std::memset(c.mutable_data(), 0, static_cast<size_t>(c.nbytes()));
      else
        c.attr("fill")(0);
    };
    py::object epi_ops = epilogue;
    if (zero_c) {
      if (s.epilogue.residual && !epilogue.is_none()) {
        py::dict d = py::cast<py::dict>(epilogue);
        if (d.contains("residual") && py::isinstance<py::array>(d["residual"])) {
          auto r = py::reinterpret_borrow<py::array>(d["residual"]);
          if (r.size() > 0 && ranges_meet(byte_range(r), byte_range(c))) {
            py::dict copy = d.attr("copy")();
            copy["residual"] = r.attr("copy")("K");
            epi_ops = copy;
          }
        }
      }
    }
    EpilogueArgs ea;
    if (s.epilogue.any()) {
      if (epi_ops.is_none()) throw UserError("this kernel has an epilogue: its operands are needed");
      ea = epilogue_args(py::cast<py::dict>(epi_ops), s.epilogue, s, c);
    }
    const EpilogueArgs* epi = s.epilogue.any() ? &ea : nullptr;
    if (!k.spec.accumulate && beta != 0.0)
      throw UserError(cat("this kernel was compiled without accumulation (beta = 0) but was called with beta = ",
                          beta, "; compile it with accumulate=True"));
    // The arrays the kernel was compiled for (same sizes, same unit strides) need no planning.
    auto unit = [](const GemmSpec& x) {
      return std::array<bool, 6>{x.sa_r == 1, x.sb_c == 1, x.sc_c == 1, x.sc_r == 1, x.sa_c == 1, x.sb_r == 1};
    };
    const bool same = s.M == k.spec.M && s.N == k.spec.N && s.K == k.spec.K && s.batch1 == k.spec.batch1 &&
                      s.batch2 == k.spec.batch2 && unit(s) == unit(k.spec) &&
                      (k.plan.fixed.empty() || gemm_args(s, k.plan).fixed_view() == gemm_args(k.spec, k.plan).fixed_view());
    const void* pa = a.data();
    const void* pb = b.data();
    void* pc = c.mutable_data();
    if (!same) {
      CpuTargetInfo target = host_target();
      target.max_threads = k.plan.threads;
      GemmPlan p = plan_gemm(s, target, overrides);
      GemmPlan p_code = p, k_code = k.plan;  // the code apart from fixed sizes and strides
      p_code.fixed.clear();
      k_code.fixed.clear();
      if (p_code.key() != k_code.key())
        throw UserError(cat("these operands (", s.str(), ") need another kernel: this one was compiled for ",
                            k.spec.str(), " (plan ", k.plan.key(), "; these need ", p.key(),
                            "); pass arrays laid out as the kernel's (numpy.ascontiguousarray) or compile one for them"));
      if (p.key() != k.plan.key()) {
        // The same plan for other strides of a small product, whose code has its strides
        // built in (GemmPlan::fixed): that variant, compiled once.
        PlanOverrides ov = overrides;
        ov["threads"] = k.plan.threads;
        if (zero_c) clear_c();
        py::gil_scoped_release nogil;
        GemmKernel other = gemm_kernel(s, ov);
        run_gemm(other, s, pa, pb, pc, alpha, beta, nullptr, epi);
        return;
      }
    }
    if (zero_c) clear_c();
    if (double(s.M) * s.N * s.K < 1.0e5) {  // microseconds: releasing the GIL would cost more
      run_gemm(k, s, pa, pb, pc, alpha, beta, nullptr, epi);
      return;
    }
    py::gil_scoped_release nogil;
    run_gemm(k, s, pa, pb, pc, alpha, beta, nullptr, epi);
  }

  std::string source(const std::string& kind) const {
    if (kind == "ir") return k.code->ir_text;
    if (kind == "llvm") return k.code->llvm_ir;
    if (kind == "asm") {
      py::gil_scoped_release nogil;
      return k.code->assembly();
    }
    throw UserError(cat("unknown source kind '", kind, "' (known: ir, llvm, asm)"));
  }
};

}  // namespace

// For bind_gpu.cpp: the steps of an epilogue from Python's description (see epilogue_of).
GemmEpilogue python_epilogue(const py::dict& d, ir::ScalarType type) { return epilogue_of(d, type); }

// For bind_cache.cpp: the spec the tuned-plan table keys on is the one gemm builds.
GemmSpec gemm_spec_of(const py::array& a, const py::array& b, const py::array& c, bool accumulate,
                      const std::array<std::string, 3>& types) {
  return spec_of(a, b, c, accumulate, types);
}

void bind_gemm(py::module_& m) {
  py::class_<PyGemmKernel>(m, "GemmKernel")
      .def_property_readonly("config", [](const PyGemmKernel& k) { return k.k.plan.fields(); })
      .def_property_readonly("key", [](const PyGemmKernel& k) { return k.k.code->key; })
      .def_property_readonly("spec", [](const PyGemmKernel& k) { return k.k.spec.str(); })
      .def_property_readonly("compile_seconds", [](const PyGemmKernel& k) { return k.k.code->compile_seconds; })
      .def_property_readonly("origin", [](const PyGemmKernel& k) { return k.k.code->origin; })
      .def_property_readonly("tuned", [](const PyGemmKernel& k) { return k.tuned; })
      .def_property_readonly("overrides", [](const PyGemmKernel& k) { return k.overrides; })
      .def("source", &PyGemmKernel::source, py::arg("kind") = "ir")
      .def("run", &PyGemmKernel::run, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"), py::arg("beta"),
           py::arg("epilogue") = py::none())
      .def("set_fast_dtypes",
           [](PyGemmKernel& k, const py::dtype& in, const py::dtype& out) {
             k.fast_in = in;
             k.fast_out = out;
           },
           py::arg("dtype"), py::arg("out_dtype"))
      .def("call_fast", &PyGemmKernel::call_fast, py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"),
           py::arg("beta"));

  m.def("compile_gemm",
        [](const Types& types, int64_t M, int64_t N, int64_t K, std::vector<int64_t> strides, bool accumulate,
           const PlanOverrides& overrides, const py::object& epilogue) {
          if (strides.size() != 6) throw UserError(cat("compile_gemm takes 6 strides, got ", strides.size()));
          GemmSpec s;
          if (!epilogue.is_none()) {
            s.set_types_with_epilogue(ir::parse_scalar(types[0]), ir::parse_scalar(types[1]), ir::parse_scalar(types[2]));
            s.epilogue = epilogue_of(py::cast<py::dict>(epilogue), s.epilogue.type);
          } else {
            s.set_types(ir::parse_scalar(types[0]), ir::parse_scalar(types[1]), ir::parse_scalar(types[2]));
          }
          if (accumulate && !ir::is_float(s.dtype) && ir::is_float(s.c_type))
            throw UserError("an integer product with an epilogue does not take beta (accumulate): add C through residual=");
          s.M = M; s.N = N; s.K = K;
          s.sa_r = strides[0]; s.sa_c = strides[1];
          s.sb_r = strides[2]; s.sb_c = strides[3];
          s.sc_r = strides[4]; s.sc_c = strides[5];
          s.accumulate = accumulate;
          py::gil_scoped_release nogil;
          if (!overrides.empty()) return PyGemmKernel{gemm_kernel(s, overrides), overrides, types};
          PlanOverrides used;
          GemmKernel k = gemm_kernel_tuned(s, &used);
          return PyGemmKernel{std::move(k), used, types, !used.empty()};
        },
        py::arg("types"), py::arg("M"), py::arg("N"), py::arg("K"), py::arg("strides"), py::arg("accumulate"),
        py::arg("overrides") = PlanOverrides{}, py::arg("epilogue") = py::none());

  // The per-call fast path of matmul: operands of one GEMM dtype (or an int8 / uint8 pair),
  // 2-D or stacks broadcast over leading dims that merge into at most two batch levels, a new
  // output or a C-contiguous `out` of an allowed dtype apart from the inputs. Returns None
  // whenever anything is out of the ordinary, and Python takes its full path, which also gives
  // the error messages.
  m.def(
      "matmul_fast",
      [](py::handle ha, py::handle hb, py::handle hout, const PlanOverrides& overrides) -> py::object {
        // Exactly numpy.ndarray: subclasses (masked arrays, matrix) take the Python path, which
        // refuses what it cannot honour (a mask) instead of computing past it.
        if (!is_ndarray(ha) || !is_ndarray(hb)) return py::none();
        if (!hout.is_none() && !is_ndarray(hout)) return py::none();
        auto a = py::reinterpret_borrow<py::array>(ha);
        auto b = py::reinterpret_borrow<py::array>(hb);
        // One 1-D operand (A @ x, x @ B; not x @ y, a scalar): numpy.matmul's promotion, a (K,)
        // vector read as a K x 1 column (or a 1 x K row) whose other dim has stride 0, its dim
        // removed from the result. These took Python's full path (10-20 us a call).
        const bool a_vec = a.ndim() == 1, b_vec = b.ndim() == 1;
        if ((a_vec && b_vec) || a.ndim() < 1 || b.ndim() < 1 || a.ndim() > 32 || b.ndim() > 32) return py::none();
        // The operands' shapes and byte strides, 1-D ones with the promoted dim. On the stack (at
        // most 32 dims + 1): four std::vectors here cost ~0.1 us a call, +13% on a 4 x 4 product.
        struct Dims {
          int n = 0;
          int64_t sh[33], st[33];
          void put(int64_t size, int64_t stride) { sh[n] = size, st[n] = stride, ++n; }
        };
        auto dims = [](const py::array& x, bool vec, bool column, Dims& o) {
          if (vec && !column) o.put(1, 0);  // (K,) -> (1, K) for A
          for (py::ssize_t d = 0; d < x.ndim(); ++d) o.put(x.shape(d), x.strides(d));
          if (vec && column) o.put(1, 0);  // (K,) -> (K, 1) for B
        };
        Dims ad, bd;
        dims(a, a_vec, false, ad);
        dims(b, b_vec, true, bd);
        const int64_t *ash = ad.sh, *ast = ad.st, *bsh = bd.sh, *bst = bd.st;
        const FastTypes ft = fast_types(a.dtype(), b.dtype());
        if (!ft.ok) return py::none();
        const int na = ad.n, nb = bd.n;
        const int64_t M = ash[na - 2], K = ash[na - 1], N = bsh[nb - 1];
        if (bsh[nb - 2] != K || M == 0 || N == 0 || K == 0) return py::none();
        if (!aligned(a) || !aligned(b)) return py::none();
        // The broadcast batch shape (numpy.matmul's rules), right-aligned.
        const int nbatch = std::max(na, nb) - 2;
        std::vector<py::ssize_t> shape(static_cast<size_t>(nbatch));
        for (int d = 0; d < nbatch; ++d) {
          const int da = d - (nbatch - (na - 2)), db = d - (nbatch - (nb - 2));
          const int64_t sa = da >= 0 ? ash[da] : 1, sb = db >= 0 ? bsh[db] : 1;
          if (sa != sb && sa != 1 && sb != 1) return py::none();
          shape[static_cast<size_t>(d)] = sa == 1 ? sb : sa;
        }
        // C's shape as the kernel sees it (batch, M, N), and as the caller gets it (a vector
        // operand's dim removed).
        std::vector<py::ssize_t> cshape = shape;
        if (!a_vec) cshape.push_back(M);
        if (!b_vec) cshape.push_back(N);
        py::array c;
        ir::ScalarType tc = ft.c;
        if (hout.is_none()) {
          c = py::array(ft.c_dtype, cshape);
        } else {
          if (!py::isinstance<py::array>(hout)) return py::none();
          c = py::reinterpret_borrow<py::array>(hout);
          const py::dtype od = c.dtype();
          if (od.byteorder() == '>') return py::none();  // not native: Python computes and swaps the bytes
          if (reinterpret_cast<uintptr_t>(c.data()) % static_cast<uintptr_t>(c.itemsize()))
            return py::none();  // misaligned: Python writes through an aligned copy
          if (!od.equal(ft.c_dtype)) {
            if (!ft.f32_out_allowed || od.num() != 11 || od.byteorder() == '>') return py::none();  // NPY_FLOAT
            tc = ir::ScalarType::f32;  // 16-bit inputs may write float32
          }
          if (!c.writeable() || !(c.flags() & py::array::c_style) ||
              c.ndim() != static_cast<py::ssize_t>(cshape.size()))
            return py::none();
          for (size_t d = 0; d < cshape.size(); ++d)
            if (c.shape(d) != cshape[d]) return py::none();
          // Apart from the inputs (conservatively: address ranges)
          const auto rc = byte_range(c);
          if (ranges_meet(rc, byte_range(a)) || ranges_meet(rc, byte_range(b))) return py::none();
        }
        const int64_t ia = a.itemsize(), ib = b.itemsize(), ic = c.itemsize();
        // C's element strides along M and N (a removed dim: 0, its length being 1).
        const int64_t sc_m = a_vec ? 0 : c.strides(nbatch) / ic;
        const int64_t sc_n = b_vec ? 0 : c.strides(nbatch + (a_vec ? 0 : 1)) / ic;
        // Batch levels: (size, element strides of a, b, c), size-1 dims dropped, dims that every
        // operand steps through evenly merged; at most two remain or Python takes over.
        struct Level { int64_t n, sa, sb, sc; };
        std::vector<Level> levels;
        for (int d = 0; d < nbatch; ++d) {
          const int64_t n = shape[static_cast<size_t>(d)];
          if (n == 1) continue;
          const int da = d - (nbatch - (na - 2)), db = d - (nbatch - (nb - 2));
          Level l{n, da >= 0 && ash[da] != 1 ? ast[da] / ia : 0,
                  db >= 0 && bsh[db] != 1 ? bst[db] / ib : 0, c.strides(d) / ic};
          if (!levels.empty() && levels.back().sa == l.sa * n && levels.back().sb == l.sb * n &&
              levels.back().sc == l.sc * n) {
            levels.back() = {levels.back().n * n, l.sa, l.sb, l.sc};
          } else {
            levels.push_back(l);
          }
        }
        if (levels.size() > 2) return py::none();
        GemmSpec spec;
        spec.set_types(ft.a, ft.b, tc);
        spec.M = M; spec.N = N; spec.K = K;
        spec.sa_r = ast[na - 2] / ia; spec.sa_c = ast[na - 1] / ia;
        spec.sb_r = bst[nb - 2] / ib; spec.sb_c = bst[nb - 1] / ib;
        // (The strides of a length-1 dim of C are never stepped: those of a row-major C, as the
        // full path's expand_dims view gives, so that both paths plan alike.)
        spec.sc_r = a_vec ? N : sc_m; spec.sc_c = b_vec ? 1 : sc_n;
        if (!levels.empty()) {
          const Level& in = levels.back();
          spec.batch2 = in.n; spec.sa_b2 = in.sa; spec.sb_b2 = in.sb; spec.sc_b2 = in.sc;
        }
        if (levels.size() == 2) {
          const Level& out = levels.front();
          spec.batch1 = out.n; spec.sa_b1 = out.sa; spec.sb_b1 = out.sb; spec.sc_b1 = out.sc;
        }
        const void* pa = a.data();
        const void* pb = b.data();
        void* pc = c.mutable_data();
        // `overrides`: plan= as the core takes them (coopjit._kernel_args._overrides), part of the
        // memo's key; a plan the planner refuses raises here as it would on the full path.
        if (double(M) * N * K * spec.batch1 * spec.batch2 < 1.0e5) {  // microseconds: releasing the GIL costs more
          run_gemm(gemm_kernel_cached(spec, overrides), spec, pa, pb, pc, 1.0, 0.0);
        } else {
          py::gil_scoped_release nogil;
          run_gemm(gemm_kernel_cached(spec, overrides), spec, pa, pb, pc, 1.0, 0.0);
        }
        return c;  // moved implicitly (a converting move: GCC 13 flags std::move here as redundant)
      },
      py::arg("a"), py::arg("b"), py::arg("out") = py::none(), py::arg("overrides") = PlanOverrides{});

  // plan cycles (debugging): the counters its kernels added since the last reset (gemm.h).
  m.def("_gemm_cycles", [](bool reset) {
    const coopjit::GemmCycles c = coopjit::gemm_cycles(reset);
    py::list slots;
    for (int64_t s = 0; s < c.slots; ++s) {
      py::list row;
      for (int64_t f = 0; f < coopjit::kCycleFields; ++f) row.append(c.counters[size_t(s * coopjit::kCycleFields + f)]);
      slots.append(row);
    }
    py::dict d;
    d["slots"] = slots;
    d["fields"] = std::vector<std::string>{"kernel", "calls", "pack_a", "pack_b", "barrier", "tiles_first", "tiles_first_n",
                                           "tiles_other", "tiles_other_n", "tile_stores"};
    d["call_ticks"] = c.call_ticks;
    d["calls"] = c.calls;
    return d;
  }, py::arg("reset") = true,
        "plan cycles: per worker index, the time-stamp counter ticks of the kernel's phases and counts ('fields' names "
        "the first of each row's 16), and the ticks and number of whole calls, since the last reset.");
  m.def("_tsc", &coopjit::read_tsc, "The time-stamp counter the kernels of plan cycles read.");
  m.def("prepack_format",
        [](const Types& types, int64_t K, int64_t N, const PlanOverrides& overrides) {
          // The panels the packed kernels read for a K x N B (row layout, as coopjit.prepack
          // forces): the plan of a tall product with this B decides nr, kb and vnni.
          GemmSpec s;
          s.set_types(ir::parse_scalar(types[0]), ir::parse_scalar(types[1]), ir::parse_scalar(types[2]));
          s.M = 4096; s.N = N; s.K = K;
          s.sa_r = K; s.sa_c = 1; s.sb_r = N; s.sb_c = 1; s.sc_r = N; s.sc_c = 1;
          PlanOverrides ov = overrides;
          ov["layout"] = 0;
          ov["pack"] = 1;
          ov["prepacked_b"] = 1;
          const GemmPlan p = plan_gemm(s, host_target(), ov);
          py::dict d;
          d["nr"] = p.nr;
          d["kb"] = p.kb;
          d["vnni"] = p.vnni;
          d["amx_tiles"] = p.amx && p.amx_feed >= 2;  // each K step of a panel as nr / 16 tiles of 1 KiB
          d["element"] = std::string(ir::name(packed_b_type(p)));
          d["panel_bytes"] = packed_b_panel_bytes(p, K, N);
          d["bytes"] = packed_b_bytes(p, K, N);
          return d;
        },
        py::arg("types"), py::arg("K"), py::arg("N"), py::arg("overrides") = PlanOverrides{},
        "How coopjit.prepack lays out a K x N B for products of these types: nr, kb, vnni, element type, bytes.");

  m.def("cross_compile",
        [](const py::array& a, const py::array& b, py::array& c, const PlanOverrides& overrides, const Types& types,
           const std::string& cpu, int threads, bool code) {
          GemmSpec s = spec_of(a, b, c, false, types);
          CrossCompiled r;
          {
            py::gil_scoped_release nogil;
            r = cross_compile_gemm(s, cpu, threads, overrides, code);
          }
          py::dict d;
          d["config"] = r.plan.fields();
          d["key"] = r.plan.key();
          d["ir"] = r.ir;
          if (code) {
            d["llvm"] = r.llvm_ir;
            d["asm"] = r.assembly;
          }
          return d;
        },
        py::arg("a"), py::arg("b"), py::arg("c"), py::arg("overrides"), py::arg("types"), py::arg("cpu"),
        py::arg("threads"), py::arg("code") = true,
        "The plan and code coopjit makes for c = a @ b on another x86 CPU (not run); code=False: the plan and "
        "kernel IR only.");

  m.def("gemm",
        [](const py::array& a, const py::array& b, py::array& c, double alpha, double beta,
           const PlanOverrides& overrides, const Types& types, const py::object& prepacked, const py::object& epilogue,
           bool check_scaled) {
          const bool fused = !epilogue.is_none();
          GemmSpec s = spec_of(a, b, c, beta != 0.0, types, fused);
          EpilogueArgs ea;
          if (fused) {
            const py::dict d = py::cast<py::dict>(epilogue);
            s.epilogue = epilogue_of(d, s.epilogue.type);
            if (beta != 0.0 && !ir::is_float(s.dtype) && ir::is_float(s.c_type))
              throw UserError(cat("an integer product with an epilogue does not take beta (got beta=", beta,
                                  "): add C through residual="));
            ea = epilogue_args(d, s.epilogue, s, c);
          }
          const void* pp = nullptr;
          if (!prepacked.is_none()) {
            auto arr = py::cast<py::array>(prepacked);
            const GemmPlan plan = plan_gemm(s, host_target(), overrides);
            const size_t need = packed_b_bytes(plan, s.K, s.N);
            if (!plan.prepacked_b || size_t(arr.nbytes()) < need || !(arr.flags() & py::array::c_style))
              throw UserError(cat("the prepacked B (", arr.nbytes(), " bytes) does not fit this product (K=", s.K,
                                  ", N=", s.N, ": ", need, " bytes in the plan's panel format ", plan.key(), ")"));
            pp = arr.data();
          }
          const void* pa = a.data();
          const void* pb = b.data();
          void* pc = c.mutable_data();
          bool scaled_once = false;
          py::gil_scoped_release nogil;
          if (fused) {  // (not memoized: the memo keys on the product alone)
            GemmKernel k = overrides.empty() ? gemm_kernel_tuned(s) : gemm_kernel(s, overrides);
            run_gemm(k, s, pa, pb, pc, alpha, beta, pp, s.epilogue.any() ? &ea : nullptr);
          } else {  // memoized with the plan fields given too (autotuning scripts call with plan= in loops)
            run_gemm(gemm_kernel_cached(s, overrides), s, pa, pb, pc, alpha, beta, pp, nullptr,
                     check_scaled ? &scaled_once : nullptr);
          }
          return scaled_once;
        },
        py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha"), py::arg("beta"),
        py::arg("overrides") = PlanOverrides{}, py::arg("types") = Types{"f32", "f32", "f32"},
        py::arg("prepacked") = py::none(), py::arg("epilogue") = py::none(), py::arg("check_scaled") = false,
        "C = alpha * a @ b + beta * C in place; a, b, c are the operands as read (transposes as views); `epilogue`: "
        "a fused epilogue's steps and operands (coopjit._epilogue). check_scaled: a float product whose plan splits "
        "K with |alpha| or |beta| > 1 is checked; True returned: C held a value that is not finite and was put back "
        "(alpha and beta are then applied once by the caller).");
}
