"""Summary of benchmarks/amx_feed_probe.c outputs (issue 14): one core alone (the first file) against copies run at once on other cores (the rest): each case's ns per tile product alone, and the median and the largest of the copies."""
import re, sys, statistics
def parse(path):
    out = {}
    for line in open(path):
        m = re.search(r"^(\S+ \S+ .*?)\s+(\d+\.\d+) ns/product", line)
        if m and "peak loop:" not in line:
            key = re.sub(r"\s+", " ", m.group(1)); out.setdefault(key, float(m.group(2)))
        m = re.search(r"\] (\w+) peak loop: (\d+\.\d+) ns/product", line)
        if m: out.setdefault(m.group(1) + " peak loop", float(m.group(2)))
    return out
solo = parse(sys.argv[1]); many = [parse(p) for p in sys.argv[2:]]
print(f"{'case':<110} solo ns  16 at once: median  max   (ns per tile product)")
for k, v in solo.items():
    xs = [m[k] for m in many if k in m]
    if xs: print(f"{k:<110} {v:6.2f}  {statistics.median(xs):6.2f} {max(xs):6.2f}   solo/median {v / statistics.median(xs):.2f}")
