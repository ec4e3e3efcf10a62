"""How a Kernel shows itself in a terminal (str: the problem and its plan, one field a line) and in Jupyter (_repr_html_: the same as a table)."""
from __future__ import annotations

import html

#: Plan fields in reading order, with what they mean.
_FIELDS = [
    ("layout", "row: C = A B as given; col: C^T = B^T A^T (unit stride on the vector side)"),
    ("mr", "register tile rows"),
    ("nr", "register tile columns (a multiple of the vector width)"),
    ("simd_width", "vector lanes (the subgroup size)"),
    ("kb", "K step of one mul_add"),
    ("kt", "K elements per K tile of the tile space"),
    ("threads", "workers"),
    ("split", "how workers share the tiles: dp, sk (Stream-K), sk+dp"),
    ("pack", "A and B copied once into zero-padded tile panels"),
    ("prepacked_b", "B packed beforehand (coopjit.prepack)"),
    ("vnni", "K pairs / quads packed for the dot instructions (vdpbf16ps, vpdpbusd)"),
    ("amx_feed", "AMX: tile loads before (0) or between (1, 2) the dot products; 2: B panels in 1 KiB tiles"),
    ("amx_prefetch", "AMX: software prefetch of the next panels (0 none, 1 A, 2 A and B, 3 / 4 1 and A and B 8 / 16 steps ahead into L2, 5 A and B 8 steps ahead into L2, 6 1 and the next kernels' cold panels into L2)"),
    ("amx_store", "AMX: full tiles straight from the tiles to C when alpha is 1 (f32 / i32 by tilestored, bf16 by one conversion a row)"),
    ("demote", "packed panels pushed to the shared L3 as written (CLDEMOTE)"),
    ("c_prefetch", "AMX: the lines a tile will write (C, or the partial sums) prefetched for writing during its K loop"),
    ("cycles", "debugging: per-worker time-stamp counter ticks of the kernel's phases (coopjit._core._gemm_cycles)"),
    ("direct_a", "AMX: tiles read a row-major A where it is (A not packed)"),
    ("inline_b", "B packed by its reader per K tile and column panel, in its L2 (no packing phase for B)"),
    ("own_a", "each worker packs its own copy of A (one row of workers, no packing barrier)"),
    ("b_prefetch", "unpacked blocked nest (k_outer): bytes ahead along B's rows that each tile prefetches; dot walk: along A's rows (0 none)"),
    ("k_inner", "blocked nest: each block of row panels through every K tile (its partial sums stay in L2)"),
    ("mc_tiles", "row panels per block of the packed loop nest"),
    ("nc_tiles", "packed nest: column panels per block, each row panel across a block (0: blocks of mc_tiles row panels)"),
    ("grid_m", "workers along M in the blocked nest (a grid_m x threads/grid_m grid of C blocks)"),
    ("shares", "blocked nest (or dot walk) cut into threads x shares shares, a slower thread's taken by the others (1: one a worker)"),
    ("ksplit", "K split into this many parts, each over all of C (one row or a small block), shared by the threads (0: none)"),
    ("fixed_shape", "sizes and strides built into the code (small products)"),
    ("unit_stride_a", "A's rows read as vectors when packing"),
    ("order", "tile walk: m_inner, k_outer (skinny: the blocked nest unpacked), dot (matrix-vector)"),
    ("unit_stride_b", "B read with vector loads"),
    ("unit_stride_c", "C written with vector stores"),
    ("accumulate", "C read and scaled by beta"),
]


class KernelDisplay:
    """Mixed into Kernel (needs m, n, k, dtype, trans_a, trans_b, accumulate, config, _plan, _core)."""

    @property
    def tuned(self) -> bool:
        """True when the plan came from the tuning database (coopjit.tune)."""
        return self._core.tuned

    @property
    def origin(self) -> str:
        """"compiled" (by LLVM in this process) or "disk" (linked from the disk cache)."""
        return self._core.origin

    def _rows(self):
        cfg = self.config
        notes = getattr(cfg, "notes", {})

        def what(name, text):  # the field's meaning, then what the planner says of this value
            return "; ".join(t for t in (text, notes.get(name, "")) if t)

        rows = [(name, cfg[name], what(name, text)) for name, text in _FIELDS if name in cfg]
        rows += [(name, v, what(name, "")) for name, v in sorted(cfg.items()) if name not in dict(_FIELDS) and name != "dtype"]
        return rows

    def _origin(self) -> str:
        core = self._core
        how = {"disk": "loaded from the disk cache", "compiled": "compiled by LLVM"}.get(core.origin, core.origin)
        plan = "tuned plan (tuning database)" if core.tuned else ("explicit plan" if self._plan else "default plan")
        return f"{plan}; {how} in {core.compile_seconds * 1e3:.1f} ms"

    def _title(self) -> str:
        return (f"gemm {self.dtype} M={self.m} N={self.n} K={self.k} trans_a={self.trans_a} "
                f"trans_b={self.trans_b} accumulate={self.accumulate} on cpu")

    def __str__(self) -> str:
        rows = self._rows()
        w = max(len(r[0]) for r in rows)
        wv = max(len(str(r[1])) for r in rows)
        lines = [f"Kernel {self._title()}", f"  {self._origin()}"]
        lines += [f"  {n:<{w}}  {str(v):<{wv}}  {what}".rstrip() for n, v, what in rows]
        lines.append('  source: kernel.source("ir" | "llvm" | "asm")')
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><td><code>{html.escape(n)}</code></td><td>{html.escape(str(v))}</td>"
                       f"<td>{html.escape(what)}</td></tr>" for n, v, what in self._rows())
        return (f"<div><b>Kernel</b> {html.escape(self._title())}<br><small>{html.escape(self._origin())}</small>"
                f"<table><tr><th>plan</th><th>value</th><th></th></tr>{body}</table>"
                "<small>source: <code>kernel.source(\"ir\" | \"llvm\" | \"asm\")</code></small></div>")
