"""TuneReport: what coopjit.tune tried and found; prints as a table, converts to a dict, draws a plot."""
from __future__ import annotations

import html
import time
import os
import warnings
from typing import Any
from dataclasses import dataclass, field


def _plan_str(plan: dict) -> str:
    return (f"{plan['layout']} {plan['mr']}x{plan['nr']} kb={plan['kb']} kt={plan['kt']} "
            f"threads={plan['threads']} split={plan['split']} pack={plan.get('pack', False)}")


@dataclass
class TuneReport:
    """The candidates of one tuning run (plan, times, status), the default plan, the winner and
    its speed-up over the default, the time spent, why the search stopped, where it was stored."""
    problem: dict
    budget_s: float
    max_candidates: int | None = None
    candidates: list = field(default_factory=list)
    default: dict | None = None
    winner: dict | None = None
    speedup: float | None = None
    elapsed_s: float = 0.0
    stopped_by: str = ""  # "time", "candidates" or "converged"
    stored: bool = False
    stored_in: str | None = None

    def best(self) -> dict | None:
        ok = [c for c in self.candidates if c["status"] == "ok"]
        return min(ok, key=lambda c: c["median_s"]) if ok else None

    def gflops(self, seconds: float) -> float:
        p = self.problem
        return 2.0 * p["m"] * p["n"] * p["k"] / seconds / 1e9

    def record(self) -> dict:
        """What the tuning database keeps of this run."""
        return {"time_s": self.winner.get("confirmed_s", self.winner["median_s"]),
                "default_time_s": self.default.get("confirmed_s") if self.default else None,
                "speedup": self.speedup, "candidates": len(self.candidates),
                "when": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def to_dict(self) -> dict:
        return {"problem": dict(self.problem), "candidates": [dict(c) for c in self.candidates],
                "default": self.default and dict(self.default), "winner": self.winner and dict(self.winner),
                "speedup": self.speedup, "elapsed_s": self.elapsed_s, "budget_s": self.budget_s,
                "max_candidates": self.max_candidates, "stopped_by": self.stopped_by, "stored": self.stored,
                "stored_in": self.stored_in}

    def _title(self) -> str:
        p = self.problem
        return (f"coopjit.tune: gemm {p['dtype']} {p['m']}x{p['n']}x{p['k']} trans_a={p['trans_a']} "
                f"trans_b={p['trans_b']} accumulate={p['accumulate']} on {p['device']}: "
                f"{len(self.candidates)} candidates in {self.elapsed_s:.1f} s (stopped: {self.stopped_by})")

    def _rows(self, limit: int) -> list:
        """The best `limit` candidates by time, plus the default, plus every wrong or failed one."""
        ok = sorted((c for c in self.candidates if c["status"] == "ok"), key=lambda c: c["median_s"])
        rows = ok[:limit]
        if self.default is not None and self.default not in rows:
            rows.append(self.default)
        rows += [c for c in self.candidates if c["status"] != "ok"]
        return rows

    def _cells(self, c: dict) -> list:
        p = c["plan"]
        # The speed-up against the default: on the confirmation timings where both have them (the
        # finalists: the winner's row then shows exactly the summary's figure), else on the first.
        both = bool(self.default and c.get("confirmed_s") and self.default.get("confirmed_s"))
        key = "confirmed_s" if both else "median_s"
        base = self.default[key] if self.default and self.default.get(key) else None
        t = c.get(key)
        notes = [n for n, on in (("default", c is self.default), ("winner", c is self.winner)) if on]
        return [p["layout"], p["mr"], p["nr"], p["kb"], p["kt"], p["threads"], p["split"],
                "yes" if p.get("pack") else "no",
                f"{t * 1e3:.3f}" if t else "-", f"{self.gflops(t):.1f}" if t else "-",
                f"{base / t:.2f}x" if t and base else "-", c["status"], " ".join(notes)]

    HEADER = ["layout", "mr", "nr", "kb", "kt", "threads", "split", "pack", "ms/call", "GFLOP/s", "vs default",
              "status", ""]

    def table(self, limit: int = 15) -> str:
        rows = [self.HEADER] + [[str(x) for x in self._cells(c)] for c in self._rows(limit)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(self.HEADER))]
        return "\n".join("  ".join(x.rjust(w) for x, w in zip(r, widths)).rstrip() for r in rows)

    def _summary(self) -> str:
        if self.winner is None:
            return "no candidate produced a correct result"
        t = self.winner.get("confirmed_s", self.winner["median_s"])
        where = (f"stored in {self.stored_in}" if self.stored_in else "used in this process") if self.stored \
            else "not stored"
        speed = f", {self.speedup:.2f}x the default plan" if self.speedup else ""
        return f"winner: {_plan_str(self.winner['plan'])}: {t * 1e3:.3f} ms{speed} ({where})"

    def __str__(self) -> str:
        return f"{self._title()}\n{self.table()}\n{self._summary()}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.HEADER)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in self._cells(c)) + "</tr>"
                       for c in self._rows(15))
        return (f"<p>{html.escape(self._title())}</p><table><tr>{head}</tr>{body}</table>"
                f"<p><b>{html.escape(self._summary())}</b></p>")

    def plot(self, path: str | os.PathLike | None = None) -> Any:
        """Candidate times in the order tried, the best so far and the default; saved to `path`
        when given. Returns the matplotlib Figure, or None (with a warning) without matplotlib."""
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            warnings.warn("TuneReport.plot needs matplotlib (pip install matplotlib)", RuntimeWarning, stacklevel=2)
            return None
        # A Figure of its own, not pyplot's: Jupyter shows the returned figure once (a pyplot
        # figure would also be drawn by the inline backend at the end of the cell: twice).
        from matplotlib.figure import Figure

        fig = Figure(figsize=(8, 4))
        ax = fig.add_subplot()
        xs = [i for i, c in enumerate(self.candidates) if c["median_s"]]
        ys = [self.candidates[i]["median_s"] * 1e3 for i in xs]
        ax.scatter(xs, ys, s=14, label="candidate (median of its first timing)")
        best, run = [], float("inf")
        for y in ys:
            run = min(run, y)
            best.append(run)
        ax.step(xs, best, where="post", color="C2", label="best so far")
        if self.default and self.default["median_s"]:
            ax.axhline(self.default["median_s"] * 1e3, color="C3", ls="--", label="default plan")
        for c, name, color in ((self.default, "default", "C3"), (self.winner, "winner", "C2")):
            if c is not None and c["median_s"] and c in self.candidates:
                i = self.candidates.index(c)
                ax.scatter([i], [c["median_s"] * 1e3], s=40, color=color, zorder=3)
                ax.annotate(f"{name}: {_plan_str(c['plan'])}", (i, c["median_s"] * 1e3), textcoords="offset points",
                            xytext=(6, 8 if name == "winner" else -14), fontsize=7, color=color)
        p = self.problem
        speed = f", winner {self.speedup:.2f}x the default" if self.speedup else ""
        ax.set(xlabel="candidate (in the order tried)", ylabel="median ms per call",
               title=f"tune gemm {p['dtype']} {p['m']}x{p['n']}x{p['k']}{speed}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        if path is not None:
            fig.savefig(path)
        return fig
