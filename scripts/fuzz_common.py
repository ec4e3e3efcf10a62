"""The loop and report the differential fuzz scripts share (fuzz_batched, fuzz_reductions,
fuzz_epilogues): each script has draw(rng) -> case, describe(case) -> str and run_case(case,
stats, ...) -> None or what went wrong; `sweep` runs a number of drawn cases (the tests run
bounded slices through it), `main` is each script's command line (--seed, --cases, the script's
own options) with its report. A script imports this module from its own directory (it puts that
on sys.path first), so it loads both when run as a script and through tests/conftest.py's
load_script, which executes it by its path.
"""
from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import numpy as np


def sweep(draw: Callable, run_case: Callable, describe: Callable, rng: np.random.Generator, cases: int,
          extra: Callable | None = None, run_args: Sequence = ()) -> tuple[list[str], dict]:
    """`cases` cases drawn from `rng` and run: (the failures, described; the stats run_case kept:
    "ran", "refused" and what else it counts). `extra(i, rng, stats)`: a further check after case
    i (its error, or None); `run_args`: run_case's arguments after (case, stats)."""
    stats = {"ran": 0, "refused": 0}
    failures = []
    for i in range(cases):
        c = draw(rng)
        if err := run_case(c, stats, *run_args):
            failures.append(f"{describe(c)}: {err}")
        if extra is not None and (err := extra(i, rng, stats)):
            failures.append(err)
    return failures, stats


def main(doc: str | None, draw: Callable, run_case: Callable, describe: Callable, argv: Sequence[str] | None = None, *,
         options: Callable | None = None, setup: Callable | None = None, report: Callable | None = None) -> int:
    """A fuzz script's command line: --seed (1), --cases (300) and `options(parser)`'s own;
    `setup(args)` -> {"extra": ..., "run_args": ...} for sweep; the first 40 failures, then
    `report(stats)`'s lines, then the counts. Exit status 1 when anything failed."""
    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0] or None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=300)
    if options is not None:
        options(ap)
    args = ap.parse_args(argv)
    failures, stats = sweep(draw, run_case, describe, np.random.default_rng(args.seed), args.cases,
                            **(setup(args) if setup is not None else {}))
    for f in failures[:40]:
        print("FAIL", f)
    if report is not None:
        report(stats)
    print(f"cases {args.cases}: ran {stats['ran']}, refused {stats['refused']}, failed {len(failures)}")
    return 1 if failures else 0
