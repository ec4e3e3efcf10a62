"""Sums up the differences between two scripts/plan_dump.py files (CPU mode) of the same script: each
differing case put in a category (an error message's text changed, an error became a plan or the
reverse, or the set of plan fields that changed, with the old and new layout / order / b_prefetch),
counted, with up to four cases of each. Session 24 (helper h14mv).
    python3 scripts/plan_dump_diff.py before.txt after.txt"""
import sys, re, collections
a = open(sys.argv[1]).read().splitlines(); b = open(sys.argv[2]).read().splitlines()
assert len(a) == len(b)
cats = collections.Counter(); ex = {}
for x, y in zip(a, b):
    if x == y: continue
    kx, vx = x.split(": ", 1); ky, vy = y.split(": ", 1)
    assert kx == ky
    if vx.startswith("ERROR") or vy.startswith("ERROR"):
        c = "error text" if vx.startswith("ERROR") and vy.startswith("ERROR") else ("error -> plan" if vx.startswith("ERROR") else "plan -> error")
    else:
        fx = dict(re.findall(r"(\w+)=([^ ]+)", vx)); fy = dict(re.findall(r"(\w+)=([^ ]+)", vy))
        d = sorted(k for k in set(fx) | set(fy) if fx.get(k) != fy.get(k))
        c = "fields " + ",".join(f"{k}:{fx.get(k)}->{fy.get(k)}" if k in ("layout", "order", "b_prefetch") else k for k in d)
    cats[c] += 1; ex.setdefault(c, []).append(kx)
for c, n in cats.most_common():
    print(f"{n:5d}  {c}\n       e.g. " + " | ".join(ex[c][:4]))
