// Validation and keys of TensorAccessSpec.
#include "spec/tensor_spec.h"

#include "core/error.h"

namespace coopjit {

void TensorAccessSpec::validate() const {
  const char* what = store ? "store_matrix" : "load_matrix";
  if (rows < 1 || rows > 256 || cols < 1 || cols > 256)
    throw UserError(cat(what, ": the matrix is ", rows, " x ", cols, "; rows and cols must be in [1, 256]"));
  if (store && decode != Decode::none) throw UserError("store_matrix: a decode function is only for loads");
  if (decode == Decode::user && (!user_decode || user_decode_key.empty()))
    throw InternalError("a user decode function without its body or key");
  if (buffer_type() != dtype && decode != Decode::user)
    throw UserTypeError(cat(what, ": the buffer holds ", ir::name(buffer_type()), " but the matrix is ", ir::name(dtype),
                            "; only a decode function may read another type"));
  if (rank < 1 || rank > 5) throw UserError(cat(what, ": tensor layout rank ", rank, " is not in [1, 5]"));
  if (view != View::none) {
    if (view_rank < 1 || view_rank > 5) throw UserError(cat(what, ": tensor view rank ", view_rank, " is not in [1, 5]"));
    if (view == View::no_dims && view_rank != rank)
      throw UserError(cat(what, ": a view without dims uses the layout's spans, so its permutation must have ", rank,
                          " entries, got ", view_rank));
  }
}

std::string TensorAccessSpec::key() const {
  std::string k = cat(store ? "store_tensor." : "load_tensor.", ir::name(dtype), ".", rows, "x", cols, ".r", rank,
                      ".", ir::name(clamp));
  if (view != View::none) {
    k += cat(view == View::dims ? ".view" : ".viewnd", view_rank, ".p");
    for (int i = 0; i < view_rank; ++i) k += cat(int(perm[i]));
  }
  if (decode == Decode::blocked) k += ".dblocked";
  if (decode == Decode::user) k += cat(".duser", user_decode_key, ".", ir::name(buffer_type()));
  return k;
}

}  // namespace coopjit
