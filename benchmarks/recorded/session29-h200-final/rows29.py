"""Lead, session 29: the planner's own plans (no named variants) on the 16-core host's skinny rows,
torch in the same rounds (benchmarks/emr16_rows_s29.py's method and rows)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks"))
import emr16_rows_s29 as r
for name in r.VARIANTS:
    r.VARIANTS[name] = [("planner", None)]
r.main()
