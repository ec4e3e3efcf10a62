// The K-major copy of an 8-bit GEMM operand (kmajor_copy.h).
#include "build/kmajor_copy.h"

#include "ir/builder.h"

namespace coopjit {

using namespace ir;

std::unique_ptr<Function> build_kmajor_copy(const std::string& name) {
  auto fp = std::make_unique<Function>();
  Function& f = *fp;
  f.name = name;
  f.attrs["subgroup_size"] = int64_t(32);
  f.attrs["subgroups_per_group"] = int64_t(kKmajorCopyGroup / 32);
  Value* S = f.add_param(Type::pointer(ScalarType::u32), "S");
  Value* D = f.add_param(Type::pointer(ScalarType::u32), "D");
  Value* R = f.add_param(Type::index(), "R");
  Value* C4 = f.add_param(Type::index(), "C4");
  Value* ss4 = f.add_param(Type::index(), "ss4");
  Value* ld4 = f.add_param(Type::index(), "ld4");
  Builder b(f);
  Value* four = b.index(4, "c4");
  Value* zero = b.index(0, "c0");
  Value* group = b.work_id(WorkId::group, 0, "group");
  Value* sg = b.work_id(WorkId::subgroup, 0, "sg");
  Value* lane = b.work_id(WorkId::lane, 0, "lane");
  // Work-group g: a tile of 32 x 8 blocks (tile rows down R first); lane: the block row, subgroup:
  // the block column.
  Value* R4 = b.div(b.add(R, b.index(3)), four, "R4");
  Value* tiles_r = b.div(b.add(R4, b.index(31)), b.index(32), "tiles_r");
  Value* br = b.add(b.mul(b.rem(group, tiles_r), b.index(32)), lane, "br");
  Value* bc = b.add(b.mul(b.div(group, tiles_r), b.index(kKmajorCopyGroup / 32)), sg, "bc");
  b.if_(b.bin(BinOp::and_, b.cmp(CmpPred::lt, bc, C4), b.cmp(CmpPred::lt, br, R4)), {}, [&](Builder& x) {
    auto u32 = [&](int64_t v) { return x.constant_int(v, ScalarType::u32); };
    Value* w[4];
    for (int i = 0; i < 4; ++i) {
      Value* r = x.add(x.mul(br, four), x.index(i), "r");
      Value* in = x.cmp(CmpPred::lt, r, R, "in");
      Value* v = x.load_scalar(S, x.select(in, x.add(x.mul(r, ss4), bc), zero), "w");
      w[i] = x.select(in, v, u32(0));
    }
    // Byte j of word i (row 4 br + i, column 4 bc + j) goes to byte i of out word j.
    for (int j = 0; j < 4; ++j) {
      Value* o = nullptr;
      for (int i = 0; i < 4; ++i) {
        Value* byte = x.rem(x.div(w[i], u32(int64_t(1) << (8 * j))), u32(256));
        Value* placed = x.mul(byte, u32(int64_t(1) << (8 * i)));
        o = o ? x.bin(BinOp::or_, o, placed) : placed;
      }
      x.store_scalar(D, x.add(x.mul(x.add(x.mul(bc, four), x.index(j)), ld4), br), o);
    }
    return std::vector<Value*>{};
  }, [](Builder&) { return std::vector<Value*>{}; });
  return fp;
}

}  // namespace coopjit
