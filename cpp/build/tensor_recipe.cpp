// The tensor-access recipe (tensor_recipe.h).
#include "build/tensor_recipe.h"

#include "core/error.h"
#include "ir/builder.h"

namespace coopjit {

using namespace ir;

std::unique_ptr<Function> build_tensor_access(const TensorAccessSpec& s, int simd_width, const std::string& name,
                                              int subgroups) {
  auto f = std::make_unique<Function>();
  f->name = name;
  f->attrs["subgroup_size"] = int64_t(simd_width);
  if (subgroups > 1) f->attrs["subgroups_per_group"] = int64_t(subgroups);
  const ScalarType T = s.dtype;
  Value* buf = f->add_param(Type::pointer(s.buffer_type()), "buf");
  Value* mat = f->add_param(Type::pointer(T), "mat");
  Value* extent = f->add_param(Type::index(), "extent");
  Value* msr = f->add_param(Type::index(), "mat_sr");
  Value* msc = f->add_param(Type::index(), "mat_sc");
  Builder::LayoutFields lf;
  const char* names[] = {"block", "dim", "stride", "offset", "span"};
  std::vector<Value*>* parts[] = {&lf.block, &lf.dim, &lf.stride, &lf.offset, &lf.span};
  for (int p = 0; p < 5; ++p)
    for (int d = 0; d < s.rank; ++d) parts[p]->push_back(f->add_param(Type::index(), cat(names[p], d)));
  lf.clamp_value = f->add_param(Type::of(ScalarType::f64), "clamp_value");
  std::vector<Value*> vdims, vstrides;
  std::array<Value*, 4> clip{};
  if (s.view == TensorAccessSpec::View::dims) {
    for (int d = 0; d < s.view_rank; ++d) vdims.push_back(f->add_param(Type::index(), cat("view_dim", d)));
    for (int d = 0; d < s.view_rank; ++d) vstrides.push_back(f->add_param(Type::index(), cat("view_stride", d)));
  }
  if (s.view != TensorAccessSpec::View::none) {
    const char* clip_names[] = {"clip_row", "clip_rows", "clip_col", "clip_cols"};
    for (int k = 0; k < 4; ++k) clip[k] = f->add_param(Type::index(), clip_names[k]);
  }

  Builder b(*f);
  const Type mt = Type::matrix(T, s.rows, s.cols, Use::acc, subgroups > 1 ? Scope::workgroup : Scope::subgroup);
  Value* zero = b.index(0, "c0");
  Builder::Access at{mat, zero, zero, msr, msc, b.index(s.rows, "rows"), b.index(s.cols, "cols")};
  Value* layout = b.tensor_layout(s.clamp, lf, "layout");
  Value* view = s.view == TensorAccessSpec::View::none ? nullptr
                                                        : b.tensor_view(s.view_rank, s.perm, vdims, vstrides, clip, "view");
  Value* m = b.load(mt, at, false, "m");
  if (s.store) {
    b.store_tensor(m, buf, layout, view, extent);
  } else {
    Value* loaded;
    if (s.decode == TensorAccessSpec::Decode::blocked) {
      // Blocked storage: the layout's index counts blocks; the element is at
      // index * prod(block) + the row-major position of coordInBlock inside the block, read only
      // when that is inside the buffer (0 otherwise).
      loaded = b.load_tensor(buf, m, layout, view, extent,
                             [&](Builder& d, Value* index, const std::vector<Value*>&, const std::vector<Value*>& cib) {
                               Value* size = d.index(1);
                               Value* in_block = d.index(0);
                               for (int k = s.rank - 1; k >= 0; --k) {
                                 in_block = d.add(in_block, d.mul(cib[k], size));
                                 size = d.mul(size, lf.block[k]);
                               }
                               Value* at = d.add(d.mul(index, size), in_block, "element");
                               Value* inside = d.bin(BinOp::and_, d.cmp(CmpPred::ge, at, d.index(0)),
                                                     d.cmp(CmpPred::lt, at, extent), "inside");
                               Value* v = d.load_scalar(buf, d.select(inside, at, d.index(0)), "v");
                               return d.select(inside, v, d.constant(0, T), "decoded");
                             }, "loaded");
    } else if (s.decode == TensorAccessSpec::Decode::user) {
      loaded = b.load_tensor(buf, m, layout, view, extent,
                             [&](Builder& d, Value* index, const std::vector<Value*>& bc, const std::vector<Value*>& cib) {
                               return s.user_decode(d, buf, extent, index, bc, cib);
                             }, "loaded");
    } else {
      loaded = b.load_tensor(buf, m, layout, view, extent, "loaded");
    }
    b.store(loaded, at, false);
  }
  return f;
}

}  // namespace coopjit
