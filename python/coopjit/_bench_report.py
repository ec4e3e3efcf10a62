"""The benchmark's outputs (coopjit.bench): ratios and peak fractions, the text table, the JSON file, the PNG plot."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

LIBS = ("coopjit", "numpy", "torch")
NAMES = {"f32_fma": "f32 FMA", "bf16_dot": "BF16 dot", "amx_bf16": "AMX bf16", "amx_int8": "AMX int8", "copy": "copy"}
COLORS = {"coopjit": "tab:red", "numpy": "tab:blue", "torch": "tab:orange"}


@dataclass(frozen=True)
class Section:
    title: str
    unit: str  # of the rate: GFLOP/s, GOP/s or GB/s
    show: str  # what the table shows: "rate" or "us" (microseconds per call)
    peak: str | None  # "f32_fma", "f64_fma", "bf16", "copy" or None
    panel: str  # the plot panel (one per dtype), "" for none


SECTIONS = {
    "gemm_f32": Section("float32 GEMM, square", "GFLOP/s", "rate", "f32_fma", "float32"),
    "gemm_f64": Section("float64 GEMM, square", "GFLOP/s", "rate", "f64_fma", "float64"),
    "small_f32": Section("small float32 GEMM from Python, time per call", "GFLOP/s", "us", "f32_fma", "float32"),
    "batched_f32": Section("stacked float32 GEMM in one matmul call, time per call", "GFLOP/s", "us", "f32_fma", ""),
    "gemm_bf16": Section("bfloat16 GEMM, square", "GFLOP/s", "rate", "bf16", "bfloat16"),
    "gemm_f16": Section("float16 GEMM, square", "GFLOP/s", "rate", None, "float16"),
    "gemm_int8": Section("int8 GEMM (int32 result), square", "GOP/s", "rate", "amx_int8", "int8"),
    "reduce": Section("reductions over large arrays (bytes read)", "GB/s", "rate", "copy", "reductions"),
    "shapes": Section("shape sweep: skinny, odd and batched products, time per call", "GFLOP/s", "us", None, ""),
    "epilogue": Section("fused epilogues (issue 17), time per call: coopjit's one kernel against the product then "
                        "the epilogue (the numpy column of the W8A8 row: coopjit's unfused product, then NumPy)",
                        "GFLOP/s", "us", "f32_fma", ""),
    "softmax": Section("a row softmax written with the KernelBuilder, on the CPU's launch grid (bytes read and "
                       "written)", "GB/s", "us", "copy", ""),
    "shapes_reduce": Section("shape sweep: reductions of few long rows, many short rows, 1-D (bytes read)", "GB/s",
                             "rate", "copy", ""),
}


def peak_reference(peak: dict, kind: str | None) -> tuple[float, str] | None:
    """(value, label) of the all-core peak a section is compared with, or None."""
    if kind is None:
        return None
    if kind == "bf16":
        kind = "amx_bf16" if peak.get("amx_bf16", {}).get("all") else "bf16_dot"
    entry = peak.get("f32_fma" if kind == "f64_fma" else kind) or {}
    if not entry.get("all"):
        return None
    value = entry["all"] / 2 if kind == "f64_fma" else entry["all"]
    label = "f32 FMA peak / 2" if kind == "f64_fma" else f"{NAMES[kind]} peak"
    return value, f"{label}, {entry['threads']} threads"


def add_ratios(result: dict) -> None:
    """Adds to each row: ratios (time of lib / time of coopjit) and the fraction of the peak per library."""
    for row in result["rows"]:
        res = row["results"]
        cj = res.get("coopjit", {})
        row["ratios"] = {lib: (res[lib]["median_s"] / cj["median_s"] if cj.get("status") == "ok"
                               and res.get(lib, {}).get("status") == "ok" else None) for lib in LIBS[1:]}
        ref = peak_reference(result["peak"], SECTIONS[row["section"]].peak)
        row["peak_ref"] = {"value": ref[0], "label": ref[1]} if ref else None
        row["peak_fraction"] = {lib: (res[lib]["rate"] / ref[0] if ref and res[lib].get("status") == "ok" else None)
                                for lib in LIBS if lib in res}


def _cell(c: dict, show: str) -> str:
    if c.get("status") != "ok":
        return {"n/a": "n/a", "skipped": "skip", "-": "-"}.get(c.get("status"), c.get("status", "-"))
    return f"{c['median_s'] * 1e6:.2f}" if show == "us" else f"{c['rate']:.1f}"


def _fmt(x: float | None, pattern: str) -> str:
    return "-" if x is None or not math.isfinite(x) else pattern.format(x)


def format_peaks(peak: dict) -> str:
    parts = []
    for name, label in NAMES.items():
        e = peak.get(name)
        if e is None:
            continue
        if e.get("all"):
            parts.append(f"{label} {e['single']:.0f} / {e['all']:.0f} {e['unit']}")
        else:
            parts.append(f"{label}: {e['note']}")
    return f"peaks measured by coopjit.peak() (1 thread / {peak.get('threads')} threads): " + "; ".join(parts)


def format_table(result: dict) -> str:
    m = result["meta"]
    lines = [f"coopjit {m['coopjit']} (LLVM {m['llvm']}, {m.get('coopjit_threads', '?')} threads) vs NumPy {m['numpy']} ({m['blas']}) and PyTorch "
             f"{m['torch'] or 'n/a'} ({m['torch_threads']} threads) on {m['model']} ({m['cpu']}), {m['cores']} cores",
             format_peaks(result["peak"]),
             "vs X: speed of coopjit / speed of X (>1: coopjit faster); %peak: of the peak named in the section title"]
    for name, label in NAMES.items():  # a compute peak measured again (coopjit.peak: the cores did not scale at first)
        note = (result["peak"].get(name) or {}).get("note", "")
        if "the best kept" in note:
            lines.append(f"NOTE: {label}: {note.split('; ', 1)[-1]}")
    if m.get("peak_other_load", 0.0) > m["config"]["busy"]:
        lines.append(f"WARNING: other processes took {m['peak_other_load']:.1f} cores while the peaks were measured: "
                     "the peaks (and the %peak columns) are not reliable")
    if m.get("busy_rows"):
        busy = m["config"]["busy"]
        lines.append(f"WARNING: other processes took more than {busy} cores during {m['busy_rows']} of "
                     f"{len(result['rows'])} cases, even when measured again: those cases (marked *) are not reliable")
    notes: dict = {}
    for key, sec in SECTIONS.items():
        rows = [r for r in result["rows"] if r["section"] == key]
        if not rows:
            continue
        ref = rows[0]["peak_ref"]
        metric = "us per call" if sec.show == "us" else sec.unit
        lines += ["", f"{sec.title} ({metric}" + (f"; %peak of {ref['label']} = {ref['value']:.0f} {sec.unit})"
                                                   if ref and sec.show == "rate" else ")")]
        width = max(12, *(len(r["label"]) for r in rows))
        head = f"{'case':>{width + 1}} {'coopjit':>9} {'numpy':>9} {'torch':>9} {'vs numpy':>9} {'vs torch':>9}"
        if sec.show == "rate" and ref:
            head += f" {'cj %peak':>9} {'np %peak':>9} {'pt %peak':>9}"
        lines += [head, "-" * len(head)]
        for r in rows:
            res = r["results"]
            busy = r.get("other_load", 0.0) > m["config"]["busy"]
            line = f"{r['label'] + ('*' if busy else ''):>{width + 1}}" + "".join(f" {_cell(res[lib], sec.show):>9}" for lib in LIBS)
            line += "".join(f" {_fmt(r['ratios'][lib], '{:.2f}'):>9}" for lib in LIBS[1:])
            if sec.show == "rate" and ref:
                line += "".join(f" {_fmt(r['peak_fraction'].get(lib) and 100 * r['peak_fraction'][lib], '{:.0f}%'):>9}"
                                for lib in LIBS)
            lines.append(line)
            for lib in LIBS:
                if res[lib].get("status") in ("n/a", "error", "WRONG"):
                    notes.setdefault((lib, res[lib]["status"], res[lib]["note"]), []).append(sec.title.split(",")[0])
    if result.get("streamk"):
        lines += ["", "Stream-K: the automatic plan against forced data-parallel (float32, ms per call)",
                  f"{'M x N x K':>18} {'tiles':>6} {'workers':>8} {'split':>6} {'auto':>9} {'dp':>9} {'speed-up':>9}",
                  "-" * 71]
        for r in result["streamk"]:
            shape = "x".join(str(v) for v in r["shape"])
            lines.append(f"{shape:>18} {r['tiles']:>6} {r['workers']:>8} {r['split']:>6} {1e3 * r['auto_s']:>9.3f} "
                         f"{1e3 * r['dp_s']:>9.3f} {r['speedup']:>9.2f}" + ("" if r["ok"] else "  WRONG"))
    if result.get("scaling"):
        lines += ["", "thread scaling: coopjit and torch at the same thread count (rates; efficiency: coopjit's rate per "
                  "worker against its rate on one)",
                  f"{'op':>10} {'size':>9} {'threads':>8} {'coopjit':>9} {'torch':>9} {'vs torch':>9} {'efficiency':>11}",
                  "-" * 71]
        for r in result["scaling"]:
            vs = r["coopjit"] / r["torch"] if r.get("torch") else None
            lines.append(f"{r['op']:>10} {r['size']:>9} {r['threads']:>8} {r['coopjit']:>9.1f} "
                         f"{_fmt(r.get('torch'), '{:.1f}'):>9} {_fmt(vs, '{:.2f}'):>9} {100 * r['efficiency']:>10.0f}%"
                         f"  {r['unit']}")
    if result.get("jit"):
        from ._bench_jit import format_rows

        lines += format_rows(result["jit"])
    if notes:
        lines += ["", "notes:"]
        for (lib, status, note), where in notes.items():
            lines.append(f"  {lib} {status} ({', '.join(dict.fromkeys(where))}): {note}")
    return "\n".join(lines)


def write_plot(result: dict, path: Path) -> bool:
    """GFLOP/s against size, one line per library, one panel per dtype (reductions: bars). False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels: dict = {}
    for r in result["rows"]:
        sec = SECTIONS[r["section"]]
        if sec.panel:
            panels.setdefault(sec.panel, []).append(r)
    ncols = min(3, max(1, len(panels)))
    nrows = max(1, math.ceil(len(panels) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4.2 * nrows), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (panel, rows) in zip(axes.flat, panels.items()):
        unit = SECTIONS[rows[0]["section"]].unit
        if panel == "reductions":
            width = 0.8 / len(LIBS)
            for i, lib in enumerate(LIBS):
                ys = [r["results"][lib].get("rate", 0.0) if r["results"][lib].get("status") == "ok" else 0.0 for r in rows]
                label = lib if any(ys) else f"{lib}: n/a"
                ax.bar([x + i * width for x in range(len(rows))], ys, width, label=label, color=COLORS[lib])
            ax.set_xticks([x + width for x in range(len(rows))], [r["label"].rsplit(" ", 1)[0] for r in rows],
                          rotation=30, ha="right", fontsize=7)
        else:
            for lib in LIBS:
                pts = sorted((r["size"], r["results"][lib]["rate"]) for r in rows if r["results"][lib].get("status") == "ok")
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=lib, color=COLORS[lib])
                elif any(r["results"][lib].get("status") == "n/a" for r in rows):
                    ax.plot([], [], label=f"{lib}: n/a", color=COLORS[lib], linestyle="none", marker="x")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size n (n x n x n)")
        ref = rows[-1]["peak_ref"]
        if ref:
            ax.axhline(ref["value"], color="gray", linestyle="--", linewidth=1, label=ref["label"])
        ax.set_ylim(bottom=0)
        ax.set_title(panel)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    m = result["meta"]
    fig.suptitle(f"coopjit vs NumPy vs PyTorch: {m['model']} ({m['cpu']}), {m['cores']} cores, {m['date'][:10]}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_all(result: dict, out_dir: Path, name: str) -> dict:
    """Writes <name>.json, <name>.txt (the table) and <name>.png (when matplotlib is there); returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"json": str(out_dir / f"{name}.json"), "table": str(out_dir / f"{name}.txt")}
    png = out_dir / f"{name}.png"
    if write_plot(result, png):
        files["plot"] = str(png)
    result["files"] = files
    (out_dir / f"{name}.txt").write_text(format_table(result) + "\n")
    with open(files["json"], "w") as f:
        json.dump(result, f, indent=1)
    return files
