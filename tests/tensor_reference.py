"""Independent reference of the tensor addressing of SPV_NV_cooperative_matrix2
(seeds/002, section "3.X Tensor Layout and View"), in plain Python, element by element.

It transcribes the document's pseudo-code:

    matrixCoordToLinear   (row, col) -> row * N + col               (no view)
    matrixCoordToLinear   with a view: clip test, then (row - cro) * min(N, clipColSpan) + (col - cco)
    linearToViewCoord     index -> view coordinate, peeling the dimensions in the order
                          permutation[VDim-1], ..., permutation[0]
    viewCoordToLinear     sum viewCoord[d] * viewStride[d]  (no view dims: row-major strides of the spans)
    linearToSpanCoord     index -> coordinate in the span, innermost dimension first
    spanCoordToTensorCoord  c = spanCoord + offset, clamp modes when c is outside [0, layoutDimension),
                          then blockCoord = c / blockSize, coordInBlock = c % blockSize
    tensorCoordToLinear   sum blockCoord[d] * stride[d]   (coordInBlock is not used: it only feeds
                          the decode function, so with a block size > 1 several elements share an address)

with these readings and fixes (the brief of the feature fixes them):

* remainders and divisions in the clamp step are those of OpSMod (the result has the sign of the
  divisor): Python's % and //, so Repeat of -1 gives D - 1;
* MirrorRepeat: the document writes `c = (c >= dim) ? (2*dim-2-c) : c`, comparing with the loop
  index `dim`.  That is a slip: the comparison is with D = layoutDimension[dim]
  (c = c smod (2D-2); c = c >= D ? 2D-2-c : c), and for D == 1 (2D-2 == 0) the result is 0;
* stores under any clamp mode other than Undefined discard an out-of-range element (the document
  says so); loads under Constant read clampValue (cast to the element type);
* Undefined with an out-of-range coordinate is undefined behaviour: the reference marks such an
  element UNDEF (a load fills it with `undefined_fill`, a store does not write it) and the tests
  only check that nothing outside the buffer is touched;
* coopjit's own rule (not the document's: it assumes the memory is there): an element whose final
  index falls outside the buffer (seen as a flat array of its element type) reads 0 and is not
  stored (HLSL 0035's bounds behaviour, per element);
* a store with a block size > 1 is forbidden by the document (data races): ValueError;
* several matrix elements may be stored to one address (strides 0, overlapping views, ...): the
  document gives no order, so `ref_store` writes in row-major order (last wins) and
  `ref_store_writes` gives every candidate value for each address.

Not modelled: the document's uint32 arithmetic wrapping at 2**32 (the tests keep every index far
below 2**31), the decode function.

`layout` and `view` are coopjit.TensorLayout / coopjit.TensorView objects (their attributes are
read) or dicts with the same fields; missing or None fields take the defaults of the coopjit API.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

CLAMP_MODES = ("undefined", "constant", "clamp_to_edge", "repeat", "mirror_repeat")
MAX_DIM = 5
NO_CLIP = 1 << 40  # "no clip region": a span larger than any matrix

# Kinds of element, as computed by element_address.
SKIP = "skip"      # outside the clip region: load leaves it unmodified, store does not write it
CONST = "const"    # out of range under Constant (load: clampValue) or any non-Undefined store (discard)
UNDEF = "undef"    # out of range under Undefined: undefined behaviour
ADDR = "addr"      # an element index into the buffer (may still fall outside the buffer)


def _get(obj, name):
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _ints(values):
    return tuple(int(v) for v in values)


def row_major_strides(extents):
    """strides[-1] = 1, strides[d] = strides[d+1] * extents[d+1]."""
    n = len(extents)
    strides = [1] * n
    for d in range(n - 2, -1, -1):
        strides[d] = strides[d + 1] * int(extents[d + 1])
    return tuple(strides)


def default_layout_strides(dims, block):
    """Row-major strides of the block grid: ceil(dims[d] / block[d]) blocks along dimension d."""
    grid = [-(-int(n) // int(b)) for n, b in zip(dims, block)]
    return row_major_strides(grid)


def normalize_layout(layout):
    dims = _ints(_get(layout, "dims"))
    rank = len(dims)
    block = _get(layout, "block")
    block = _ints(block) if block is not None else (1,) * rank
    strides = _get(layout, "strides")
    strides = _ints(strides) if strides is not None else default_layout_strides(dims, block)
    offsets = _get(layout, "offsets")
    offsets = _ints(offsets) if offsets is not None else (0,) * rank
    spans = _get(layout, "spans")
    spans = _ints(spans) if spans is not None else dims
    clamp = _get(layout, "clamp") or "undefined"
    clamp_value = _get(layout, "clamp_value")
    clamp_value = 0 if clamp_value is None else clamp_value
    assert 1 <= rank <= MAX_DIM, f"rank {rank}"
    assert len(block) == len(strides) == len(offsets) == len(spans) == rank
    assert clamp in CLAMP_MODES, clamp
    return SimpleNamespace(rank=rank, dims=dims, block=block, strides=strides, offsets=offsets,
                           spans=spans, clamp=clamp, clamp_value=clamp_value)


def normalize_view(view, lay):
    """The view as the pseudo-code sees it (None stays None)."""
    if view is None:
        return None
    dims = _get(view, "dims")
    has_dims = dims is not None
    if has_dims:
        vdims = _ints(dims)
        strides = _get(view, "strides")
        strides = _ints(strides) if strides is not None else row_major_strides(vdims)
    else:
        # "If the tensor view type has hasDimensions false, then the dimensions of the tensor
        # layout span are used instead", and viewCoordToLinear sets the strides to match t.span.
        vdims = lay.spans
        strides = row_major_strides(lay.spans)
    rank = len(vdims)
    perm = _get(view, "permutation")
    perm = _ints(perm) if perm is not None else tuple(range(rank))
    assert sorted(perm) == list(range(rank)), perm
    clip = _get(view, "clip")
    clip = _ints(clip) if clip is not None else (0, NO_CLIP, 0, NO_CLIP)
    return SimpleNamespace(rank=rank, has_dims=has_dims, dims=vdims, strides=strides,
                           permutation=perm, clip=clip)


# ---- The clamp step (spanCoordToTensorCoord), one coordinate. ----

def smod(a, b):
    """OpSMod: the remainder has the sign of the divisor (Python's %)."""
    return a % b


def mirror_repeat(c, d):
    # Fixed slip: the document compares with the loop index `dim`; the intended comparison is
    # with the layout dimension D.  For D == 1 the period 2D-2 is 0 and the result is 0.
    if d == 1:
        return 0
    period = 2 * d - 2
    c = smod(c, period)
    return period - c if c >= d else c


def clamp_coord(c, d, mode):
    """The coordinate after the clamp mode (c out of [0, d)); None for Constant / Undefined."""
    if mode == "clamp_to_edge":
        return min(max(c, 0), d - 1)
    if mode == "repeat":
        return smod(c, d)
    if mode == "mirror_repeat":
        return mirror_repeat(c, d)
    return None


# ---- The whole index computation of one element. ----

def matrix_index(view, row, col, n):
    """matrixCoordToLinear, with or without a view; None when the view's clip skips the element."""
    if view is None:
        return row * n + col
    cro, crs, cco, ccs = view.clip
    if row < cro or row >= cro + crs or col < cco or col >= cco + ccs:
        return None
    row -= cro
    col -= cco
    width = min(n, ccs)
    return row * width + col


def linear_to_view_coord(view, index):
    coord = [0] * view.rank
    for dim in range(view.rank - 1, -1, -1):
        i = view.permutation[dim]
        coord[i] = index % view.dims[i]
        index //= view.dims[i]
    return coord


def view_coord_to_linear(view, coord):
    return sum(coord[d] * view.strides[d] for d in range(view.rank))


def linear_to_span_coord(lay, index):
    coord = [0] * lay.rank
    for dim in range(lay.rank - 1, -1, -1):
        coord[dim] = index % lay.spans[dim]
        index //= lay.spans[dim]
    return coord


def span_coord_to_tensor_coord(lay, span_coord, op):
    """(kind, blockCoord, coordInBlock); kind is CONST, UNDEF or ADDR."""
    block_coord, in_block = [], []
    undefined = False
    for dim in range(lay.rank):
        c = span_coord[dim] + lay.offsets[dim]
        d = lay.dims[dim]
        if c < 0 or c >= d:
            mode = lay.clamp
            # "For stores, other than Undefined, everything is treated as discard"
            if op == "store" and mode != "undefined":
                mode = "constant"
            if mode == "constant":
                return CONST, None, None
            if mode == "undefined":
                undefined = True  # keep c as it is: only to go on computing something
            else:
                c = clamp_coord(c, d, mode)
        in_block.append(smod(c, lay.block[dim]))
        block_coord.append(c // lay.block[dim])
    return (UNDEF if undefined else ADDR), block_coord, in_block


def tensor_coord_to_linear(lay, block_coord):
    return sum(block_coord[d] * lay.strides[d] for d in range(lay.rank))


def element_address(lay, view, row, col, n, op):
    """(kind, index) of matrix element (row, col) of a matrix with n columns; op 'load' / 'store'.
    lay / view are normalized (normalize_layout / normalize_view)."""
    index = matrix_index(view, row, col, n)
    if index is None:
        return SKIP, None
    if view is not None:
        index = view_coord_to_linear(view, linear_to_view_coord(view, index))
    span_coord = linear_to_span_coord(lay, index)
    kind, block_coord, _ = span_coord_to_tensor_coord(lay, span_coord, op)
    if kind == CONST:
        return CONST, None
    return kind, tensor_coord_to_linear(lay, block_coord)


def ref_addresses(rows, cols, layout, view=None, op="load"):
    """Two (rows, cols) arrays: the kind of each element and its index (-1 where there is none)."""
    lay = normalize_layout(layout)
    v = normalize_view(view, lay)
    kinds = np.empty((rows, cols), dtype=object)
    index = np.full((rows, cols), -1, dtype=np.int64)
    for r in range(rows):
        for c in range(cols):
            k, i = element_address(lay, v, r, c, cols, op)
            kinds[r, c] = k
            if i is not None:
                index[r, c] = i
    return kinds, index


def ref_undefined_mask(rows, cols, layout, view=None, op="load"):
    """True for the elements whose access is undefined behaviour (Undefined, out of range)."""
    kinds, _ = ref_addresses(rows, cols, layout, view, op)
    return kinds == UNDEF


def _clamp_value(layout, dtype):
    return np.array(normalize_layout(layout).clamp_value).astype(dtype)


def ref_load(buffer, rows, cols, layout, view=None, init=None, undefined_fill=0):
    """The (rows, cols) matrix a load gives.  `init` is the matrix whose values the clipped
    (skipped) elements keep (zeros when None).  Undefined-behaviour elements get undefined_fill."""
    flat = np.asarray(buffer).reshape(-1)
    dtype = flat.dtype
    out = np.zeros((rows, cols), dtype=dtype) if init is None else np.array(init, dtype=dtype)
    assert out.shape == (rows, cols)
    kinds, index = ref_addresses(rows, cols, layout, view, "load")
    clamp_value = _clamp_value(layout, dtype)
    for r in range(rows):
        for c in range(cols):
            k = kinds[r, c]
            if k == SKIP:
                continue
            if k == CONST:
                out[r, c] = clamp_value
            elif k == UNDEF:
                out[r, c] = undefined_fill
            else:
                i = index[r, c]
                # coopjit's rule: an index outside the buffer reads 0
                out[r, c] = flat[i] if 0 <= i < flat.size else 0
    return out


def ref_store_writes(matrix, buffer_size, layout, view=None):
    """{index: [values written there, in row-major order]} for the defined, in-buffer writes of a
    store; also the number of undefined-behaviour elements.  Block size > 1: ValueError."""
    lay = normalize_layout(layout)
    if any(b > 1 for b in lay.block):
        raise ValueError(f"block {lay.block}: a block size > 1 must not be used with a store")
    matrix = np.asarray(matrix)
    rows, cols = matrix.shape
    kinds, index = ref_addresses(rows, cols, layout, view, "store")
    writes, undefined = {}, 0
    for r in range(rows):
        for c in range(cols):
            k = kinds[r, c]
            if k == UNDEF:
                undefined += 1
            elif k == ADDR:
                i = int(index[r, c])
                if 0 <= i < buffer_size:  # coopjit's rule: outside the buffer, dropped
                    writes.setdefault(i, []).append(matrix[r, c])
    return writes, undefined


def ref_store(matrix, buffer, layout, view=None):
    """A new buffer (same shape and dtype): `buffer` after the store of `matrix` (last write wins
    where several elements share an address; undefined-behaviour elements are not written)."""
    out = np.array(buffer, copy=True)
    flat = out.reshape(-1)
    writes, _ = ref_store_writes(matrix, flat.size, layout, view)
    for i, values in writes.items():
        flat[i] = values[-1]
    return out
